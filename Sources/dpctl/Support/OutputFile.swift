import DataProtection
import Foundation
import SystemPackage

/// Where `get -o <file>` writes, decided from what is at the path itself (never following
/// a symbolic link in this process: the kernel follows it, with its checks).
///
/// - Nothing: a new file (mode 0600) beside the path, made durable, then renamed to it.
/// - A regular file this user owns: replaced the same way (a new file in the same
///   directory, renamed over it), so the old content stays until the new one is complete;
///   its mode is kept.
/// - Anything else (a symbolic link, a device, FIFO or socket) is opened with `open(2)` and
///   written in place, as a shell's `>` does: the kernel's `protected_symlinks`,
///   `protected_regular` and `protected_fifos` rules apply (a link another user planted in
///   a sticky directory is refused: `notPermitted`). A regular file reached so must be this
///   user's (it is then truncated and written); a new one is made 0600.
/// - A regular file of another user (directly or through a link) is `notPermitted`: its
///   owner could read the plaintext, and replacing it would change its owner behind the
///   kernel's back (the sticky-directory rule).
/// - A directory is `isADirectory`.
struct OutputFile {
    /// How the bytes reach the path.
    enum Method {
        /// Into `temporary`, then renamed over `final` (in the same directory).
        case replace(temporary: FilePath, final: FilePath)
        /// Straight into what the kernel opened at the path.
        case inPlace
    }

    let path: FilePath
    let descriptor: FileDescriptor
    let method: Method
    /// Named in errors: what the user typed.
    let describe: String

    /// Opens the output for `given` (what the user typed).
    static func open(_ given: String) throws(DataProtectionError) -> OutputFile {
        let path = FilePath(given)
        var status = stat()
        guard lstat(given, &status) == 0 else {
            guard errno == ENOENT else { throw failure("lstat", given) }
            return try replacing(path, describe: given, keeping: nil)
        }
        switch status.st_mode & S_IFMT {
        case S_IFDIR:
            throw DataProtectionError(.isADirectory, "\(given) is a directory.", hint: "Give a file name, e.g. -o \(given)/<name>.")
        case S_IFREG:
            try requireOwned(status, describe: given)
            return try replacing(path, describe: given, keeping: status)
        default:
            return try inPlace(path, describe: given)
        }
    }

    /// A new file beside `path`, to be renamed over it at ``commit()``.
    private static func replacing(_ path: FilePath, describe: String, keeping existing: stat?) throws(DataProtectionError) -> OutputFile {
        let name = path.lastComponent?.string ?? "output"
        let temporary = path.removingLastComponent().appending(".\(name).dpctl-\(UUID().uuidString)")
        let descriptor = try call("create", describe) {
            try FileDescriptor.open(temporary, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec, .noFollow],
                                    permissions: [.ownerReadWrite])
        }
        if let existing {
            // Ours: its group (where this user may give it) and mode are kept; set-id bits are not carried to new content.
            _ = fchown(descriptor.rawValue, uid_t.max, existing.st_gid)
            _ = fchmod(descriptor.rawValue, existing.st_mode & 0o777)
        }
        return OutputFile(path: path, descriptor: descriptor, method: .replace(temporary: temporary, final: path), describe: describe)
    }

    /// The path opened by the kernel (links followed under its rules) and written in place.
    private static func inPlace(_ path: FilePath, describe: String) throws(DataProtectionError) -> OutputFile {
        // O_CREAT as a shell's `>`: the kernel's protected_regular and protected_fifos apply;
        // no O_TRUNC before the owner is known. Opening a FIFO blocks until a reader comes.
        let descriptor = try call("open", describe) {
            try FileDescriptor.open(path, .writeOnly, options: [.create, .closeOnExec, FileDescriptor.OpenOptions(rawValue: O_NOCTTY)],
                                    permissions: [.ownerReadWrite])
        }
        do throws(DataProtectionError) {
            var status = stat()
            guard fstat(descriptor.rawValue, &status) == 0 else { throw failure("fstat", describe) }
            if status.st_mode & S_IFMT == S_IFREG {
                try requireOwned(status, describe: describe)
                guard ftruncate(descriptor.rawValue, 0) == 0 else { throw failure("truncate", describe) }
            }
        } catch {
            try? descriptor.close()
            throw error
        }
        return OutputFile(path: path, descriptor: descriptor, method: .inPlace, describe: describe)
    }

    /// Refuses a regular file of another user: plaintext written there would be its owner's to read.
    private static func requireOwned(_ status: stat, describe: String) throws(DataProtectionError) {
        guard status.st_uid != geteuid() else { return }
        throw DataProtectionError(
            .notPermitted, "\(describe) is a file of another user (uid \(status.st_uid)): dpctl does not write into it.",
            hint: "Remove it first (if you may), or choose another path.")
    }

    /// Completes the output: for a replaced file, `fsync` and rename (after checking that
    /// what is at the path is still nothing or this user's regular file); then closes the descriptor.
    func commit() throws(DataProtectionError) {
        defer { try? descriptor.close() }
        guard case .replace(let temporary, let final) = method else { return }
        do throws(DataProtectionError) {
            guard fsync(descriptor.rawValue) == 0 else { throw Self.failure("fsync", describe) }
            var status = stat()
            if lstat(final.string, &status) == 0 {
                guard status.st_mode & S_IFMT == S_IFREG else {
                    throw DataProtectionError(.ioFailure, "Cannot write \(describe): it was replaced while being written.")
                }
                try Self.requireOwned(status, describe: describe)
            }
            guard rename(temporary.string, final.string) == 0 else { throw Self.failure("rename", describe) }
        } catch {
            unlink(temporary.string)
            throw error
        }
    }

    /// Removes what an unfinished output left (the temporary file of a replacement).
    func abandon() {
        try? descriptor.close()
        if case .replace(let temporary, _) = method { unlink(temporary.string) }
    }

    /// `errno` of `operation` as an error: a refusal by the kernel (EACCES, EPERM) is `notPermitted`.
    private static func failure(_ operation: String, _ describe: String) -> DataProtectionError {
        error(Errno(rawValue: errno), operation, describe)
    }

    private static func error(_ errno: Errno, _ operation: String, _ describe: String) -> DataProtectionError {
        if errno == .permissionDenied || errno == .notPermitted {
            return DataProtectionError(
                .notPermitted, "Cannot write \(describe): \(operation): \(errno.description).",
                hint: "A symbolic link or file of another user in a shared (sticky) directory is refused by the kernel; choose another path.")
        }
        if errno == .tooManySymbolicLinkLevels {
            return DataProtectionError(.ioFailure, "Cannot write \(describe): \(operation): too many levels of symbolic links.")
        }
        return DataProtectionError(.ioFailure, "Cannot write \(describe): \(operation): \(errno.description).")
    }

    private static func call<R>(_ operation: String, _ describe: String, _ body: () throws -> R) throws(DataProtectionError) -> R {
        do {
            return try body()
        } catch let errno as Errno {
            throw error(errno, operation, describe)
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot write \(describe): \(operation): \(error).")
        }
    }
}
