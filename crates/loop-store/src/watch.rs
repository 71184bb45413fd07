//! A watch on a directory of records (inotify): which record files were changed,
//! created, moved or removed since it was last drained, so that a view of them reads
//! again only those (`live`, `index`). Draining when nothing happened is one
//! non-blocking `read`. Linux only: elsewhere no watch can be set, and a view reads
//! everything as it would without one.

use std::collections::BTreeSet;

pub(crate) use imp::Watch;

/// What a watch told since it was last drained.
pub(crate) enum Drained {
    /// The slugs of the record files changed, created, moved or removed.
    Names(BTreeSet<String>),
    /// Events were lost (queue overflow) or the directory itself went away.
    Lost,
}

#[cfg(target_os = "linux")]
mod imp {
    use std::collections::BTreeSet;
    use std::io;
    use std::mem::MaybeUninit;
    use std::path::Path;

    use rustix::fd::OwnedFd;
    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
    use rustix::io::Errno;

    use super::Drained;
    use crate::layout::record_slug;

    #[derive(Debug)]
    pub(crate) struct Watch(OwnedFd);

    impl Watch {
        pub(crate) fn new(dir: &Path) -> io::Result<Self> {
            let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
            let changes = WatchFlags::CLOSE_WRITE
                | WatchFlags::MOVED_TO
                | WatchFlags::MOVED_FROM
                | WatchFlags::CREATE
                | WatchFlags::DELETE
                | WatchFlags::DELETE_SELF
                | WatchFlags::MOVE_SELF
                | WatchFlags::ONLYDIR;
            inotify::add_watch(&fd, dir, changes)?;
            Ok(Self(fd))
        }

        /// Every event queued, without waiting.
        pub(crate) fn drain(&self) -> io::Result<Drained> {
            let lost = ReadFlags::QUEUE_OVERFLOW
                | ReadFlags::IGNORED
                | ReadFlags::DELETE_SELF
                | ReadFlags::MOVE_SELF;
            let mut buf = [MaybeUninit::uninit(); 4096];
            let mut events = inotify::Reader::new(&self.0, &mut buf);
            let mut names = BTreeSet::new();
            loop {
                match events.next() {
                    Ok(event) if event.events().intersects(lost) => return Ok(Drained::Lost),
                    Ok(event) => {
                        let name = event.file_name().and_then(|name| name.to_str().ok());
                        names.extend(name.and_then(record_slug).map(str::to_owned));
                    }
                    Err(Errno::WOULDBLOCK) => return Ok(Drained::Names(names)),
                    Err(Errno::INTR) => {}
                    Err(err) => return Err(err.into()),
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::path::Path;

    use super::Drained;

    #[derive(Debug)]
    pub(crate) enum Watch {}

    impl Watch {
        pub(crate) fn new(_dir: &Path) -> io::Result<Self> {
            Err(io::ErrorKind::Unsupported.into())
        }

        pub(crate) fn drain(&self) -> io::Result<Drained> {
            match *self {}
        }
    }
}
