import CSocket

/// Keeps a process holding keys away from other processes of its user.
public enum ProcessHardening {
    /// Makes the process non-dumpable (`PR_SET_DUMPABLE` 0: no ptrace attach and no
    /// `/proc/<pid>/mem` for processes of the same user without `CAP_SYS_PTRACE`) and
    /// sets its core file limit to zero (`RLIMIT_CORE`).
    public static func makeNonDumpable() throws(SocketError) {
        let status = dp_process_harden()
        guard status == 0 else { throw SocketError("prctl(PR_SET_DUMPABLE, 0) / setrlimit(RLIMIT_CORE, 0)", errno: -status) }
    }

    /// Whether the process is dumpable.
    public static var isDumpable: Bool { dp_process_is_dumpable() == 1 }
}
