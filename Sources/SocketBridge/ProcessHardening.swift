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

    /// From now on, every heap block the process frees (`free`, and the old block of a
    /// `realloc` that moves) is zeroed first, so plaintext that passed through ordinary
    /// buffers (Swift arrays, strings, `Data`) does not outlive them in freed memory.
    /// One-way for the life of the process.
    ///
    /// - Throws: `ENOTSUP` where `free` cannot be replaced (a sanitizer's runtime owns it, or
    ///   the C library is not glibc).
    public static func wipeFreedMemory() throws(SocketError) {
        let status = dp_process_wipe_freed_memory()
        guard status == 0 else { throw SocketError("wiping freed memory", errno: -status) }
    }

    /// Whether freed heap memory is wiped (``wipeFreedMemory()`` succeeded).
    public static var wipesFreedMemory: Bool { dp_process_wipes_freed_memory() == 1 }
}
