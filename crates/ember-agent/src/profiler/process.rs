//! What `/proc` says about a sampled process, and the service name derived from it.

/// What `/proc` says about a process (empty strings when it is gone).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessMeta {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// Executable path.
    pub exe: String,
    /// Command line, arguments joined by spaces.
    pub cmdline: String,
    /// cgroup path (the v2 unified entry, else the first one).
    pub cgroup: String,
}

impl ProcessMeta {
    /// Reads `/proc/PID`; `comm` is the fallback name when the process already exited.
    pub fn read(pid: u32, comm: &str) -> ProcessMeta {
        let dir = format!("/proc/{pid}");
        let read = |f: &str| std::fs::read(format!("{dir}/{f}")).ok();
        let comm_now = read("comm")
            .map(|b| String::from_utf8_lossy(&b).trim_end().to_string())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| comm.to_string());
        let exe = std::fs::read_link(format!("{dir}/exe"))
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let cmdline = read("cmdline")
            .map(|b| {
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let cgroup = read("cgroup")
            .map(|b| parse_cgroup(&String::from_utf8_lossy(&b)))
            .unwrap_or_default();
        ProcessMeta {
            pid,
            comm: comm_now,
            exe,
            cmdline,
            cgroup,
        }
    }
}

/// The cgroup path of a `/proc/PID/cgroup` file: the v2 `0::` line, else the first line's path.
pub fn parse_cgroup(text: &str) -> String {
    let mut first = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(_), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if id == "0" {
            return path.to_string();
        }
        first.get_or_insert_with(|| path.to_string());
    }
    first.unwrap_or_default()
}

/// `service_name` when none is configured: the systemd unit (`nginx.service` → `nginx`), else
/// the container id (docker/containerd/cri-o scopes, 12 characters), else the executable's
/// file name, else the command name.
pub fn derive_service_name(meta: &ProcessMeta) -> String {
    let segments: Vec<&str> = meta.cgroup.split('/').filter(|s| !s.is_empty()).collect();
    // Containers first: their scope may sit under a .service or .slice of the runtime.
    for seg in segments.iter().rev() {
        let id = seg.strip_suffix(".scope").unwrap_or(seg);
        for prefix in ["docker-", "cri-containerd-", "crio-", "libpod-", ""] {
            if let Some(rest) = id.strip_prefix(prefix)
                && rest.len() == 64
                && rest.bytes().all(|b| b.is_ascii_hexdigit())
            {
                return rest[..12].to_string();
            }
        }
    }
    for seg in segments.iter().rev() {
        if let Some(unit) = seg.strip_suffix(".service") {
            // user@1000.service holds a user's session; the process is not that unit.
            if !unit.starts_with("user@") && !unit.is_empty() {
                return unit.to_string();
            }
        }
    }
    let exe_name = meta
        .exe
        .trim_end_matches(" (deleted)")
        .rsplit('/')
        .next()
        .unwrap_or("");
    if !exe_name.is_empty() {
        return exe_name.to_string();
    }
    if meta.comm.is_empty() {
        "unknown_service".into()
    } else {
        meta.comm.clone()
    }
}

/// This host's name, for `__meta_system_hostname`.
pub(super) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A process with this executable and cgroup (the other fields fixed), for filter tests.
    pub(in crate::profiler) fn meta(exe: &str, cgroup: &str) -> ProcessMeta {
        ProcessMeta {
            pid: 1,
            comm: "c".into(),
            exe: exe.into(),
            cmdline: String::new(),
            cgroup: cgroup.into(),
        }
    }

    #[test]
    fn service_names() {
        assert_eq!(
            derive_service_name(&meta("/usr/sbin/nginx", "/system.slice/nginx.service")),
            "nginx"
        );
        let id = "4f1c0e9a7b2d3c4e5f60718293a4b5c6d7e8f90112233445566778899aabbccd";
        assert_eq!(id.len(), 64);
        assert_eq!(
            derive_service_name(&meta("/app", &format!("/system.slice/docker-{id}.scope"))),
            &id[..12]
        );
        assert_eq!(
            derive_service_name(&meta(
                "/usr/bin/bash",
                "/user.slice/user-0.slice/user@0.service/app.slice/x.scope"
            )),
            "bash"
        );
        assert_eq!(derive_service_name(&meta("", "")), "c");
        assert_eq!(
            parse_cgroup("12:cpu:/a\n0::/system.slice/x.service\n"),
            "/system.slice/x.service"
        );
        assert_eq!(parse_cgroup("4:memory:/docker/abc\n"), "/docker/abc");
    }

    #[test]
    fn reads_own_process() {
        let m = ProcessMeta::read(std::process::id(), "x");
        assert!(!m.comm.is_empty());
        assert!(m.exe.contains("ember_agent"), "{m:?}");
        assert!(m.cmdline.contains("ember_agent"), "{m:?}");
    }
}
