import Foundation

/// Two real users for attacks across users on one machine: a victim made for the test
/// (`useradd`, removed afterwards) and `nobody` (uid 65534) as the attacker. Needs root,
/// `useradd`, `userdel` and `setpriv`.
enum LocalUsers {
    static let setpriv = "/usr/bin/setpriv"
    static let attacker: (uid: uid_t, gid: gid_t) = (65534, 65534)

    /// Whether the test can run processes as two real users (else it is skipped, saying so).
    static var available: Bool {
        getuid() == 0 && ["/usr/sbin/useradd", "/usr/sbin/userdel", setpriv].allSatisfy {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    /// A system user made for one test; ``remove()`` deletes it.
    struct Victim {
        let name: String
        let uid: uid_t
        let gid: gid_t

        /// Makes the user `name` (no home directory) and returns it.
        static func create(_ name: String = "dptest-victim-\(getpid())") throws -> Victim {
            _ = try LocalUsers.run("/usr/sbin/userdel", [name])  // left by a run that was killed, if any
            let made = try LocalUsers.run("/usr/sbin/useradd", ["-M", "-r", "-s", "/usr/sbin/nologin", name])
            guard made.status == 0 else { throw CocoaError(.featureUnsupported, userInfo: [NSLocalizedDescriptionKey: "useradd: \(made.output)"]) }
            guard let entry = getpwnam(name) else { throw CocoaError(.fileNoSuchFile) }
            return Victim(name: name, uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
        }

        func remove() { _ = try? LocalUsers.run("/usr/sbin/userdel", [name]) }

        /// `setpriv` arguments that run a command as this user.
        var wrapper: [String] { LocalUsers.wrapper(uid: uid, gid: gid) }
    }

    /// `setpriv` arguments that run a command as `uid`/`gid` with no supplementary groups.
    static func wrapper(uid: uid_t, gid: gid_t) -> [String] {
        [setpriv, "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--"]
    }

    /// Runs `program arguments` (as root, or through a `wrapper`); its status and merged output.
    @discardableResult
    static func run(_ program: String, _ arguments: [String], wrapper: [String] = []) throws -> (status: Int32, output: String) {
        let process = Process()
        let command = wrapper + [program] + arguments
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    /// Sets the sysctl file `name` (under /proc/sys) to `value` for the duration of `body`, then
    /// restores it. Where it cannot be set (a read-only /proc/sys in a container), `body` runs
    /// with the setting as it is, and is told so (`false`).
    static func withSysctl<R>(_ name: String, _ value: String, _ body: (_ isSet: Bool) throws -> R) throws -> R {
        let path = "/proc/sys/" + name.replacingOccurrences(of: ".", with: "/")
        let before = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        var changed = false
        if before != value { changed = (try? Data((value + "\n").utf8).write(to: URL(fileURLWithPath: path))) != nil }
        defer { if changed { try? Data((before + "\n").utf8).write(to: URL(fileURLWithPath: path)) } }
        return try body(before == value || changed)
    }
}
