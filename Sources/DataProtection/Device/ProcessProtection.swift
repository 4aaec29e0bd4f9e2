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

    /// Makes every heap block the process frees be zeroed first (`free` and `realloc`
    /// replaced for the process; one-way). For a process that passes other processes'
    /// plaintext through ordinary buffers for hours (the agent): what it held is gone
    /// from its memory once released, not merely once reused. Costs a `memset` per free.
    ///
    /// Only the `dpctl` executable links the replacement: a library must not override its
    /// users' allocator (a preloaded jemalloc would be handed to glibc's `free`). Elsewhere
    /// this throws, and freed memory is left as the allocator leaves it.
    ///
    /// - Throws: `ioFailure` where `free` is not replaced (a program other than `dpctl`;
    ///   sanitizer builds; not glibc).
    public static func wipeFreedMemory() throws(DataProtectionError) {
        do {
            try ProcessHardening.wipeFreedMemory()
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot wipe freed memory in this process: \(error).")
        }
    }

    /// Whether freed heap memory is wiped in this process (``wipeFreedMemory()``).
    public static var wipesFreedMemory: Bool { ProcessHardening.wipesFreedMemory }
}
