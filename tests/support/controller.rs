//! A Kiln controller running in-process against a test cluster, as
//! `kiln controller` runs it: repository credentials from the Secrets of
//! namespace `kiln`, a default plugin host.

use std::sync::Arc;

use kiln::controller::{self, Context, ControllerConfig, ControllerSecrets};
use kiln::plugin::{HostConfig, PluginHost};
use kiln::source::git::{GitConfig, GitSource};

/// A running controller. Dropping `stop` (or the whole value) stops it.
pub struct Running {
    /// Its context (metrics, caches, shards).
    pub ctx: Arc<Context>,
    /// Send (or drop) to stop it the way SIGTERM does.
    pub stop: tokio::sync::oneshot::Sender<()>,
    /// Ends when it has stopped.
    pub done: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops it and waits: running reconciles finish, Leases are released.
    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        self.done.await.expect("the controller task panicked");
    }
}

/// Starts a controller with `config` on `client`, its Git cache as `git`
/// says.
pub fn start(client: kube::Client, git: GitConfig, config: ControllerConfig) -> Running {
    let secrets = ControllerSecrets::watch(client.clone(), "kiln");
    let git = GitSource::new(git, Arc::new(secrets.repo_credentials())).expect("a Git source");
    let host = PluginHost::new(HostConfig::default()).expect("a plugin host");
    let ctx = Arc::new(Context::new(client, git, host, config, secrets));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(controller::run(ctx.clone(), async move {
        let _ = stopped.await;
    }));
    Running { ctx, stop, done }
}
