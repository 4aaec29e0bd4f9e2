import DataProtection
import DataProtectionAgent
import Foundation
import Testing

/// Who may talk to the agent: processes of its own user only, checked on the socket's
/// peer credentials (`SO_PEERCRED`) before any byte of a request is read.
@Suite("Agent security")
struct AgentSecurityTests {
    /// A minimal client in Python: hello, then the first answer (`ok` or `failure <code>`).
    static let probe = """
        import socket, struct, sys
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        try:
            s.sendall(bytes.fromhex('000000050100000001'))
        except OSError:
            pass
        def read(n):
            b = b''
            while len(b) < n:
                c = s.recv(n - len(b))
                if not c:
                    break
                b += c
            return b
        n = struct.unpack('>I', read(4))[0]
        p = read(n)
        if p[0] == 0:
            print('ok')
        else:
            l = struct.unpack('>I', p[1:5])[0]
            print('failure', p[5:5 + l].decode())
        """

    /// Running a process as another user needs root, `setpriv` and a Python for the probe.
    static let canSwitchUser = getuid() == 0
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")

    static func runProbe(socket: String, asUser uid: UInt32?) throws -> String {
        let process = Process()
        if let uid {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups", "/usr/bin/python3", "-c", probe, socket]
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", probe, socket]
        }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("a process of another user is refused, even when it can reach the socket", .enabled(if: canSwitchUser))
    func otherUserRefused() throws {
        try withAgent { agent in
            // Open the way to the socket on purpose (the agent made it 0600 in a 0700 directory):
            // what is left to stop user 65534 is the peer-credential check.
            let directory = (agent.socketPath as NSString).deletingLastPathComponent
            chmod(agent.root.path, 0o755)
            chmod(directory, 0o711)
            chmod(agent.socketPath, 0o666)
            let ownUser = try Self.runProbe(socket: agent.socketPath, asUser: nil)
            let otherUser = try Self.runProbe(socket: agent.socketPath, asUser: 65534)
            #expect(ownUser == "ok")
            #expect(otherUser == "failure notPermitted")
            // The agent still serves its own user afterwards.
            #expect(try agent.client().status().state == .booted)
        }
    }

    @Test("the agent's socket is made 0600 in a directory only its user can enter")
    func socketModes() throws {
        try withAgent { agent in
            var status = stat()
            #expect(lstat(agent.socketPath, &status) == 0)
            #expect(status.st_mode & 0o777 == 0o600)
            #expect(stat((agent.socketPath as NSString).deletingLastPathComponent, &status) == 0)
            #expect(status.st_mode & 0o077 == 0)
        }
    }

    @Test("a socket directory open to others is refused")
    func openDirectoryRefused() throws {
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dpagent-open-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        chmod(root.path, 0o777)
        let store = try ProtectedStore(creatingAt: root.appendingPathComponent("store"), passcode: "1234",
                                       configuration: DeviceConfiguration(passcodeCost: .minimal))
        expectCode(.notPermitted) {
            _ = try AgentServer(store: store, socketPath: root.appendingPathComponent("agent.sock").path)
        }
    }

    @Test("starting an agent never changes the process's umask (other threads create files meanwhile)")
    func umaskUntouched() throws {
        // The socket used to be bound under umask 0177: for that instant, every directory another
        // thread created came out 0600 (the CI run that found it: a store root without its x bit).
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dpagent-umask-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try ProtectedStore(creatingAt: root.appendingPathComponent("store"), passcode: "1234",
                                       configuration: DeviceConfiguration(passcodeCost: .minimal))
        let stop = Locked(false)
        let seen = Locked(Set<String>())
        let watcher = Thread {
            while !stop.withLock({ $0 }) {
                let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
                if let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }) {
                    seen.withLock { _ = $0.insert(String(line.split(separator: "\t").last ?? "")) }
                }
            }
        }
        watcher.start()
        for index in 0..<200 {
            let socket = root.appendingPathComponent("run/\(index).sock").path
            let server = try AgentServer(store: store, socketPath: socket)
            withExtendedLifetime(server) {}
            unlink(socket)
        }
        stop.withLock { $0 = true }
        Thread.sleep(forTimeInterval: 0.05)
        #expect(seen.withLock { $0.count } == 1, "the umask changed while agents started: \(seen.withLock { $0 })")
    }
}
