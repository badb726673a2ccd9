//! Raw `.tgz` archives for tests of archive handling. Shared by the
//! integration tests (`support::tgz`) and the unit tests of
//! `src/source/helm/archive.rs` (included there by path), so hostile
//! archives are built one way.

use std::io::Write as _;

/// A `.tgz` of raw entries: (path, type, content or link target). Names
/// are written unchecked into the header: the point is hostile names
/// (absolute, `..`, links, devices).
pub fn raw(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut builder = tar::Builder::new(gz);
    for (path, kind, data) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(*kind);
        header.set_mode(0o644);
        let name = &mut header.as_old_mut().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        if matches!(kind, tar::EntryType::Symlink | tar::EntryType::Link) {
            header
                .set_link_name(std::str::from_utf8(data).expect("link target is text"))
                .expect("link target fits the header");
            header.set_size(0);
            header.set_cksum();
            builder.append(&header, &[][..]).expect("append to memory");
        } else {
            header.set_size(data.len() as u64);
            header.set_cksum();
            builder.append(&header, *data).expect("append to memory");
        }
    }
    let mut gz = builder.into_inner().expect("tar to memory");
    gz.flush().expect("flush to memory");
    gz.finish().expect("gzip to memory")
}
