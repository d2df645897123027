import Foundation

/// The process's file descriptors: each connection (database, push service, app endpoint
/// client) and each file read holds one while open.
public enum FileDescriptors {
    /// Raises the soft `RLIMIT_NOFILE` to the hard one, as far as `ceiling`: systemd and most
    /// shells start a process at a soft 1024, however high the hard limit (systemd's is
    /// 524288), and the unit's `LimitNOFILE=` may set both. Returns the limit in force.
    @discardableResult
    public static func raiseLimit(ceiling: UInt64 = 65_536) -> UInt64 {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        let wanted = min(limit.rlim_max, max(limit.rlim_cur, rlim_t(ceiling)))
        if wanted > limit.rlim_cur {
            var raised = limit
            raised.rlim_cur = wanted
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return UInt64(wanted) }
        }
        return UInt64(limit.rlim_cur)
    }

    /// Whether the process cannot open a file now because it (EMFILE) or the system (ENFILE)
    /// has run out of descriptors: asked after a file could not be read, so that running out
    /// is reported as what it is, never as the file's fault.
    public static func areExhausted() -> Bool {
        let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            close(fd)
            return false
        }
        return errno == EMFILE || errno == ENFILE
    }
}
