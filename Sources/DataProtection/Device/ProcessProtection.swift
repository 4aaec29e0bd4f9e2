import SocketBridge

/// Keeps a process that handles protected data out of core dumps and away from the
/// other processes of its user.
///
/// Keys live in secure memory that is never dumped, but plaintext passes through
/// ordinary buffers (`Data` returned by reads, Codable values): a core dump of a crash
/// would carry it. `dpctl` calls ``makeNonDumpable()`` first thing; so does the agent.
public enum ProcessProtection {
    /// Sets the core file limit to zero (`RLIMIT_CORE`) and makes the process non-dumpable
    /// (`PR_SET_DUMPABLE` 0: no core dump, and processes of the same user without
    /// `CAP_SYS_PTRACE` can neither `ptrace` it nor read `/proc/<pid>/mem`). One-way for the
    /// life of the process (an `exec` of a set-uid program aside).
    ///
    /// - Throws: `ioFailure` if the system refuses (not on Linux: `prctl` is Linux's).
    public static func makeNonDumpable() throws(DataProtectionError) {
        do {
            try ProcessHardening.makeNonDumpable()
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot keep this process out of core dumps: \(error).")
        }
    }

    /// Whether the process may still be dumped (or traced by its user's processes).
    public static var isDumpable: Bool { ProcessHardening.isDumpable }
}
