//! Starting the command to profile without losing its first instructions.
//!
//! `std::process::Command::spawn` returns only after `exec`, which is too
//! late to attach inheritable perf events to the child. We fork ourselves:
//! the child blocks on a pipe until the parent has opened its events (with
//! `enable_on_exec`), then `execv`s the target. A second close-on-exec pipe
//! reports an `exec` failure back to the parent.

use crate::SamplerError;
use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A forked child waiting for [`StoppedChild::release`] before it `exec`s.
#[derive(Debug)]
pub struct StoppedChild {
    pid: i32,
    go: Option<OwnedFd>,
    err: OwnedFd,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 requires.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Finds `program` the way a shell would: as given when it contains a slash,
/// else in `$PATH`.
fn resolve(program: &Path) -> Option<PathBuf> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Some(program.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .map(|m| {
                    use std::os::unix::fs::PermissionsExt;
                    m.is_file() && m.permissions().mode() & 0o111 != 0
                })
                .unwrap_or(false)
        })
}

/// Forks a child that will run `argv` once released.
pub fn spawn_stopped(argv: &[OsString]) -> Result<StoppedChild, SamplerError> {
    let first = argv
        .first()
        .ok_or_else(|| SamplerError::Config("no command given".into()))?;
    let program = resolve(Path::new(first)).ok_or_else(|| {
        SamplerError::Launch(
            first.to_string_lossy().into_owned(),
            io::Error::from(io::ErrorKind::NotFound),
        )
    })?;
    let to_c = |s: &[u8]| {
        CString::new(s).map_err(|_| SamplerError::Config("argument contains a NUL byte".into()))
    };
    let path_c = to_c(program.as_os_str().as_bytes())?;
    let args_c: Vec<CString> = argv
        .iter()
        .map(|a| to_c(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args_c.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());

    let (go_r, go_w) = pipe().map_err(SamplerError::Pipe)?;
    let (err_r, err_w) = pipe().map_err(SamplerError::Pipe)?;
    // SAFETY: fork is called while this process holds no locks we need in the
    // child; the child only performs async-signal-safe calls (close, read,
    // execv, write, _exit) on data prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(SamplerError::Launch(
            first.to_string_lossy().into_owned(),
            io::Error::last_os_error(),
        ));
    }
    if pid == 0 {
        // SAFETY: child side of fork; see above. Every pointer refers to
        // memory that was copied into the child with the address space.
        unsafe {
            libc::close(go_w.as_raw_fd());
            libc::close(err_r.as_raw_fd());
            let mut byte = 0u8;
            let n = libc::read(go_r.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
            if n != 1 {
                // The parent went away without releasing us.
                libc::_exit(127);
            }
            libc::execv(path_c.as_ptr(), arg_ptrs.as_ptr());
            let errno = *libc::__errno_location();
            let bytes = errno.to_ne_bytes();
            libc::write(err_w.as_raw_fd(), bytes.as_ptr().cast(), bytes.len());
            libc::_exit(127);
        }
    }
    drop(go_r);
    drop(err_w);
    Ok(StoppedChild {
        pid,
        go: Some(go_w),
        err: err_r,
    })
}

impl StoppedChild {
    /// The child's pid (valid for perf_event_open before release).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Lets the child `exec`; returns an error when `exec` failed.
    pub fn release(mut self, name: &str) -> Result<i32, SamplerError> {
        if let Some(go) = self.go.take() {
            let byte = [1u8];
            // SAFETY: writing one byte from a valid buffer to our pipe end.
            unsafe {
                libc::write(go.as_raw_fd(), byte.as_ptr().cast(), 1);
            }
        }
        let mut buf = [0u8; 4];
        // SAFETY: reading at most 4 bytes into a 4-byte buffer; EOF (0) means
        // the close-on-exec write end vanished in a successful exec.
        let n = unsafe { libc::read(self.err.as_raw_fd(), buf.as_mut_ptr().cast(), 4) };
        if n == 4 {
            let errno = i32::from_ne_bytes(buf);
            let _ = wait(self.pid, false);
            return Err(SamplerError::Launch(
                name.to_string(),
                io::Error::from_raw_os_error(errno),
            ));
        }
        Ok(self.pid)
    }
}

impl Drop for StoppedChild {
    fn drop(&mut self) {
        if self.go.is_some() {
            // Never released: closing the pipe makes the child exit; reap it.
            self.go = None;
            let _ = wait(self.pid, false);
        }
    }
}

pub use ember_samples::ExitStatus;

/// Reaps `pid`; with `nohang`, returns `None` while it still runs.
pub fn wait(pid: i32, nohang: bool) -> Option<ExitStatus> {
    let mut status = 0i32;
    let flags = if nohang { libc::WNOHANG } else { 0 };
    loop {
        // SAFETY: `status` is a valid int for waitpid to write.
        let rc = unsafe { libc::waitpid(pid, &mut status, flags) };
        if rc == pid {
            return Some(if libc::WIFEXITED(status) {
                ExitStatus::Code(libc::WEXITSTATUS(status))
            } else {
                ExitStatus::Signal(libc::WTERMSIG(status))
            });
        }
        if rc < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_child_runs_and_exits() {
        let child = spawn_stopped(&["sh".into(), "-c".into(), "exit 3".into()]).unwrap();
        let pid = child.release("sh").unwrap();
        assert_eq!(wait(pid, false), Some(ExitStatus::Code(3)));
    }

    #[test]
    fn missing_program_is_an_error() {
        assert!(
            spawn_stopped(&["/nonexistent/ember-test-binary".into()])
                .is_ok_and(|c| { c.release("x").is_err() })
        );
        assert!(spawn_stopped(&["ember-no-such-program-xyz".into()]).is_err());
    }

    #[test]
    fn unreleased_child_is_reaped() {
        let child = spawn_stopped(&["true".into()]).unwrap();
        let pid = child.pid();
        drop(child);
        // Already reaped by Drop: waitpid now fails (ECHILD).
        assert_eq!(wait(pid, true), None);
    }
}
