//! jq for `ignoreDifferences`, run in a small pool of worker processes.
//!
//! jaq (the jq Kiln uses) cannot be interrupted from inside: `def f: f; f`
//! loops without touching a value, `def f: [f]; f` recurses until the
//! thread's stack overflows (which aborts the whole process), `"x" * 1e10`
//! allocates gigabytes in one step. So expressions never run in the
//! controller's process: they run in worker processes (the `kiln` binary
//! itself, started as `kiln __jq-worker`), at most
//! [`JqConfig::workers`] at a time, each request under a deadline after
//! which the worker is killed, each worker under a memory cap it enforces
//! on itself ([`serve`]). A worker that is killed, runs out of memory or
//! crashes is reaped and replaced on the next request. Callers await the
//! answer: no thread of theirs waits.

use std::ffi::OsString;
use std::io::{BufRead as _, Write as _};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

/// The hidden subcommand of the `kiln` binary that runs [`serve`].
pub const WORKER_SUBCOMMAND: &str = "__jq-worker";
/// How long one expression may run on one object by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// How many worker processes may run at once by default (each is one
/// expression on one object at a time).
pub const DEFAULT_WORKERS: usize = 2;
/// Memory (resident set) a worker may use by default before it ends itself.
pub const DEFAULT_MAX_MEMORY: u64 = 128 << 20;
/// The exit status of a worker that went past its memory cap.
const EXIT_OUT_OF_MEMORY: i32 = 86;
/// What a worker may map beyond its memory cap for itself (thread stacks,
/// the allocator's arenas, the binary's data).
const DATA_SLACK: u64 = 64 << 20;
/// How often a worker looks at its own memory.
const WATCH_INTERVAL: Duration = Duration::from_millis(5);

/// How jq expressions are run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JqConfig {
    /// The program of a worker. Default: this process's own executable (the
    /// `kiln` binary), run as `kiln __jq-worker`.
    pub program: PathBuf,
    /// Worker processes at most. Default: [`DEFAULT_WORKERS`].
    pub workers: usize,
    /// Deadline of one expression on one object (and of one compilation).
    /// Default: [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// Memory cap of a worker, in bytes. Default: [`DEFAULT_MAX_MEMORY`].
    pub max_memory: u64,
}

impl Default for JqConfig {
    fn default() -> Self {
        Self {
            program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("kiln")),
            workers: DEFAULT_WORKERS,
            timeout: DEFAULT_TIMEOUT,
            max_memory: DEFAULT_MAX_MEMORY,
        }
    }
}

/// Why an expression gave no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JqError {
    /// The expression does not compile, or failed on the object.
    #[error("{0}")]
    Failed(String),
    /// The expression ran past the deadline; its worker was killed.
    #[error("did not finish within {0:?} (stopped)")]
    Timeout(Duration),
    /// The expression took more memory than a worker may use.
    #[error("used more than {} MiB of memory (stopped)", .0 >> 20)]
    OutOfMemory(u64),
    /// The worker died (a recursion too deep for its stack, for example).
    #[error("the jq worker crashed ({0}): a recursion too deep?")]
    Crashed(String),
    /// No worker could be started or spoken to.
    #[error("jq worker {program}: {error}")]
    Worker {
        /// The worker program.
        program: String,
        /// Why.
        error: std::io::Error,
    },
}

/// One request to a worker: a line of JSON.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    /// The expression; the worker runs `del(expression)`.
    expression: String,
    /// The object; absent to only compile.
    #[serde(default)]
    input: Option<Value>,
}

/// One answer of a worker: a line of JSON.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Response {
    /// The object without the selected paths (`null` after a compilation).
    Ok(Value),
    /// What jaq said.
    Error(String),
}

/// Runs jq expressions in worker processes; cheap to clone (the pool is
/// shared). No process is started before the first expression.
#[derive(Clone, Debug)]
pub struct Jq {
    inner: Arc<Pool>,
}

#[derive(Debug)]
struct Pool {
    config: JqConfig,
    slots: Semaphore,
    idle: Mutex<Vec<Worker>>,
}

#[derive(Debug)]
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Default for Jq {
    fn default() -> Self {
        Self::new(JqConfig::default())
    }
}

impl Jq {
    /// A pool run as `config` says.
    pub fn new(config: JqConfig) -> Self {
        let slots = Semaphore::new(config.workers.max(1));
        Self {
            inner: Arc::new(Pool {
                config,
                slots,
                idle: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &JqConfig {
        &self.inner.config
    }

    /// Compiles `del(expression)`; the error says why it does not.
    pub async fn check(&self, expression: &str) -> Result<(), JqError> {
        self.call(Request {
            expression: expression.to_owned(),
            input: None,
        })
        .await
        .map(|_| ())
    }

    /// `input` without the paths `expression` selects (`del(expression)`).
    pub async fn delete(&self, expression: &str, input: Value) -> Result<Value, JqError> {
        self.call(Request {
            expression: expression.to_owned(),
            input: Some(input),
        })
        .await
    }

    async fn call(&self, request: Request) -> Result<Value, JqError> {
        let pool = &self.inner;
        let _slot = pool
            .slots
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let idle = pool.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut worker = match idle {
            Some(worker) => worker,
            None => self.spawn()?,
        };
        // serde_json never writes a raw newline: one request, one line.
        let mut line = serde_json::to_vec(&request).expect("a request serializes");
        line.push(b'\n');
        let timeout = pool.config.timeout;
        let exchange = async {
            worker.stdin.write_all(&line).await?;
            worker.stdin.flush().await?;
            let mut answer = String::new();
            worker.stdout.read_line(&mut answer).await?;
            Ok::<_, std::io::Error>(answer)
        };
        let answer = match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(answer)) if !answer.is_empty() => answer,
            // End of output or a broken pipe: the worker is gone.
            Ok(_) => return Err(self.reap(worker).await),
            Err(_) => {
                // `kill` also waits for it: nothing is left behind.
                let _ = worker.child.kill().await;
                return Err(JqError::Timeout(timeout));
            }
        };
        let response: Response = match serde_json::from_str(&answer) {
            Ok(response) => response,
            Err(e) => {
                let _ = worker.child.kill().await;
                return Err(
                    self.worker_error(std::io::Error::other(format!("unexpected answer: {e}")))
                );
            }
        };
        pool.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(worker);
        match response {
            Response::Ok(value) => Ok(value),
            Response::Error(message) => Err(JqError::Failed(message)),
        }
    }

    fn spawn(&self) -> Result<Worker, JqError> {
        let config = &self.inner.config;
        let mut child = Command::new(&config.program)
            .args([
                OsString::from(WORKER_SUBCOMMAND),
                OsString::from(config.max_memory.to_string()),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env_clear()
            // The kiln binary runs on mimalloc, which reserves a 1 GiB
            // arena at start: past the worker's RLIMIT_DATA, so the worker
            // could not start. A small reserve keeps the hard bound usable.
            .env("MIMALLOC_ARENA_RESERVE", "8MiB")
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.worker_error(e))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            unreachable!("both are piped")
        };
        Ok(Worker {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    /// The error of a worker that stopped answering, once it has ended.
    async fn reap(&self, mut worker: Worker) -> JqError {
        drop(worker.stdin);
        let status =
            match tokio::time::timeout(self.inner.config.timeout, worker.child.wait()).await {
                Ok(Ok(status)) => status,
                Ok(Err(e)) => return self.worker_error(e),
                Err(_) => {
                    let _ = worker.child.kill().await;
                    return JqError::Crashed("did not exit after closing its output".into());
                }
            };
        // An allocation past RLIMIT_DATA aborts the worker (SIGABRT).
        let aborted = std::os::unix::process::ExitStatusExt::signal(&status) == Some(6);
        if status.code() == Some(EXIT_OUT_OF_MEMORY) || aborted {
            JqError::OutOfMemory(self.inner.config.max_memory)
        } else {
            JqError::Crashed(status.to_string())
        }
    }

    fn worker_error(&self, error: std::io::Error) -> JqError {
        JqError::Worker {
            program: self.inner.config.program.display().to_string(),
            error,
        }
    }
}

/// The worker: answers requests, one JSON line each, from stdin to stdout
/// until stdin ends. A watchdog thread ends the process with a distinct
/// status once its resident memory passes `max_memory` bytes.
pub fn serve(max_memory: u64) -> std::io::Result<()> {
    // A hard bound first: the kernel refuses allocations past it, so an
    // expression that touches gigabytes between two looks of the watchdog
    // ends this worker (an allocation failure aborts it), never the
    // controller's container. The slack covers the process itself.
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    // Never above a hard limit already set (raising it would be refused).
    let hard = getrlimit(Resource::Data).maximum;
    let limit = hard.map_or(max_memory.saturating_add(DATA_SLACK), |hard| {
        hard.min(max_memory.saturating_add(DATA_SLACK))
    });
    setrlimit(
        Resource::Data,
        Rlimit {
            current: Some(limit),
            maximum: Some(limit),
        },
    )?;
    std::thread::Builder::new()
        .name("jq-memory-watch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(WATCH_INTERVAL);
                if resident_memory().is_some_and(|rss| rss > max_memory) {
                    std::process::exit(EXIT_OUT_OF_MEMORY);
                }
            }
        })?;
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let response = match serde_json::from_str::<Request>(&line?) {
            Ok(request) => match run(&request.expression, request.input) {
                Ok(value) => Response::Ok(value.unwrap_or(Value::Null)),
                Err(message) => Response::Error(message),
            },
            Err(e) => Response::Error(format!("bad request: {e}")),
        };
        serde_json::to_writer(&mut stdout, &response)?;
        stdout.write_all(b"\n")?;
        stdout.flush()?;
    }
    Ok(())
}

/// This process's resident set size, in bytes (Linux).
fn resident_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

/// Compiles `del(expression)` and runs it on `input`, if given.
fn run(expression: &str, input: Option<Value>) -> Result<Option<Value>, String> {
    use jaq_core::load::{Arena, File, Loader};
    use jaq_core::{Compiler, Ctx, RcIter};
    use jaq_json::Val;

    let code = format!("del({expression})");
    let loader = Loader::new(jaq_std::defs().chain(jaq_json::defs()));
    let arena = Arena::default();
    let modules = loader
        .load(
            &arena,
            File {
                code: code.as_str(),
                path: (),
            },
        )
        .map_err(|errors| format!("{} parse error(s)", errors.len()))?;
    let filter = Compiler::default()
        .with_funs(jaq_std::funs().chain(jaq_json::funs()))
        .compile(modules)
        .map_err(|errors| format!("{} compile error(s)", errors.len()))?;
    let Some(input) = input else { return Ok(None) };
    let inputs = RcIter::new(core::iter::empty());
    let mut out = filter.run((Ctx::new([], &inputs), Val::from(input)));
    match out.next() {
        Some(Ok(value)) => Ok(Some(value.into())),
        Some(Err(e)) => Err(e.to_string()),
        None => Err("the expression produced no output".into()),
    }
}
