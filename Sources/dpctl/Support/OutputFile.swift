import DataProtection
import Foundation
import SystemPackage

/// Where `get -o <file>` writes, decided from what is at the path (as `cp` and `age -o` do).
///
/// - A symbolic link is followed to its target, and the rules below apply to the target.
/// - A regular file, or nothing: a new file (mode 0600) beside it, made durable, then
///   renamed over it, so the old content stays until the new one is complete. A replaced
///   file's mode and owner are kept where this process may set them.
/// - A device, FIFO or socket is opened and written in place: no rename, no `fsync`.
/// - A directory is `isADirectory`.
struct OutputFile {
    /// How the bytes reach the path.
    enum Method {
        /// Into `temporary`, then renamed over `final`.
        case replace(temporary: FilePath, final: FilePath, keeping: Ownership?)
        /// Straight into the special file at the path.
        case inPlace
    }

    /// The mode and owner of a regular file being replaced.
    struct Ownership {
        let permissions: FilePermissions
        let user: uid_t
        let group: gid_t
    }

    let path: FilePath
    let descriptor: FileDescriptor
    let method: Method
    /// Named in errors: what the user typed.
    let describe: String

    /// Opens the output for `given` (what the user typed).
    static func open(_ given: String) throws(DataProtectionError) -> OutputFile {
        let target = try resolveLinks(FilePath(given), describe: given)
        let existing = try? target.stat(followTargetSymlink: false)
        switch existing?.type {
        case .directory?:
            throw DataProtectionError(.isADirectory, "\(given) is a directory.", hint: "Give a file name, e.g. -o \(given)/<name>.")
        case .characterSpecial?, .blockSpecial?, .fifo?, .socket?:
            // Opening a FIFO blocks until a reader comes, as writing to it with the shell would.
            let descriptor = try call("open", given) {
                try FileDescriptor.open(target, .writeOnly, options: [.closeOnExec, .noFollow])
            }
            return OutputFile(path: target, descriptor: descriptor, method: .inPlace, describe: given)
        default:
            let name = target.lastComponent?.string ?? "output"
            let temporary = target.removingLastComponent().appending(".\(name).dpctl-\(UUID().uuidString)")
            let descriptor = try call("create", given) {
                try FileDescriptor.open(temporary, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                                        permissions: [.ownerReadWrite])
            }
            let ownership = existing.map {
                Ownership(permissions: $0.permissions, user: $0.userID.rawValue, group: $0.groupID.rawValue)
            }
            return OutputFile(path: target, descriptor: descriptor,
                              method: .replace(temporary: temporary, final: target, keeping: ownership), describe: given)
        }
    }

    /// Completes the output: for a replaced file, its mode and owner, `fsync`, rename;
    /// then closes the descriptor.
    func commit() throws(DataProtectionError) {
        defer { try? descriptor.close() }
        guard case .replace(let temporary, let final, let ownership) = method else { return }
        do throws(DataProtectionError) {
            if let ownership {
                // Best effort, as cp -p without root: a mode or owner this process may not set stays 0600 / ours.
                _ = fchown(descriptor.rawValue, ownership.user, ownership.group)
                _ = fchmod(descriptor.rawValue, ownership.permissions.rawValue & 0o7777)
            }
            guard fsync(descriptor.rawValue) == 0 else { throw Self.failure("fsync", describe) }
            guard rename(temporary.string, final.string) == 0 else { throw Self.failure("rename", describe) }
        } catch {
            unlink(temporary.string)
            throw error
        }
    }

    /// Removes what an unfinished output left (the temporary file of a replacement).
    func abandon() {
        try? descriptor.close()
        if case .replace(let temporary, _, _) = method { unlink(temporary.string) }
    }

    /// `path` with every symbolic link along its last component followed (at most 40, as the kernel does).
    private static func resolveLinks(_ path: FilePath, describe: String) throws(DataProtectionError) -> FilePath {
        var current = path
        for _ in 0..<40 {
            guard let status = try? current.stat(followTargetSymlink: false), status.type == .symbolicLink else { return current }
            let destination: String
            do {
                destination = try FileManager.default.destinationOfSymbolicLink(atPath: current.string)
            } catch {
                throw DataProtectionError(.ioFailure, "Cannot read the link \(current): \(error.localizedDescription)")
            }
            let next = FilePath(destination)
            current = next.isAbsolute ? next : current.removingLastComponent().pushing(next)
        }
        throw DataProtectionError(.ioFailure, "Too many levels of symbolic links at \(describe).")
    }

    private static func failure(_ operation: String, _ describe: String) -> DataProtectionError {
        DataProtectionError(.ioFailure, "Cannot write \(describe): \(operation): \(Errno(rawValue: errno).description).")
    }

    private static func call<R>(_ operation: String, _ describe: String, _ body: () throws -> R) throws(DataProtectionError) -> R {
        do {
            return try body()
        } catch let errno as Errno {
            throw DataProtectionError(.ioFailure, "Cannot write \(describe): \(operation): \(errno.description).")
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot write \(describe): \(operation): \(error).")
        }
    }
}
