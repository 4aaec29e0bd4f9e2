import DBusBridge
import DataProtection
import DataProtectionAgent
import Foundation
import Synchronization

/// How fast the agent's session following locks (`dpctl bench --session-lock`): from a
/// screensaver's `ActiveChanged(true)` sent on a private session bus (its own `dbus-daemon`) to
/// the class A keys discarded (grace 0), over `locks` locks, with no open handle and with
/// `handles` open `complete` handles holding unsynchronized writes (flushed at each lock).
/// Needs `dbus-daemon`.
package struct SessionLockWorkload: Sendable {
    /// Locks timed.
    package var locks = 100
    /// Open `complete` handles, each with 4 KiB not yet synchronized at each lock.
    package var handles = 16

    package init(locks: Int = 100, handles: Int = 16) {
        self.locks = locks
        self.handles = handles
    }

    package func run(_ scratch: BenchScratch, progress: @Sendable (String) -> Void) throws -> [BenchRow] {
        progress("session lock: \(locks) locks from a screensaver signal on a private bus, without and with \(handles) handles")
        return [try row(scratch, handles: 0), try row(scratch, handles: handles)]
    }

    private func row(_ scratch: BenchScratch, handles: Int) throws -> BenchRow {
        let bus = try PrivateSessionBus(in: scratch.directory)
        defer { bus.stop() }
        let device = scratch.store.device
        let locked = DispatchSemaphore(value: 0)
        let follower = LoginSessionFollower(
            device: device, buses: .init(system: nil, session: .address(bus.address)), logger: .init(label: "DataProtection.bench")
        ) { event in
            if event.change == .locked { locked.signal() }
        }
        defer { follower.stop() }
        guard follower.following.isFollowing else { throw DataProtectionError(.ioFailure, "The bench's session bus did not answer.") }
        let screensaver = try DBusConnection(.address(bus.address))
        defer { screensaver.close() }
        let payload = Data(repeating: 0x5A, count: 4096)
        try device.unlock()
        let open = try (0..<handles).map { index in
            try scratch.store.openFile(atPath: "session-lock-\(handles)-\(index)", create: true, protection: .complete)
        }
        defer { for handle in open { try? handle.close() } }
        var latencies: [Duration] = []
        var direct: [Duration] = []
        let clock = ContinuousClock()
        for round in 0..<locks {
            try device.unlock()
            for handle in open { try handle.write(contentsOf: payload, atOffset: 0) }
            let start = clock.now
            try screensaver.emitSignal(path: "/org/gnome/ScreenSaver", interface: "org.gnome.ScreenSaver", member: "ActiveChanged",
                                       [.boolean(true)])
            guard locked.wait(timeout: .now() + 5) == .success else {
                throw DataProtectionError(.ioFailure, "Lock \(round) never arrived.")
            }
            latencies.append(clock.now - start)
            guard !device.isAvailable(.complete) else {
                throw DataProtectionError(.integrityFailure, "The complete key survived a session lock with grace 0.")
            }
            // The same lock called directly, for the share of D-Bus in the figure.
            try device.unlock()
            for handle in open { try handle.write(contentsOf: payload, atOffset: 0) }
            direct.append(try measure { try device.lock() })
        }
        let (p50, p99) = (Self.percentile(latencies, 0.50), Self.percentile(latencies, 0.99))
        let (directP50, directP99) = (Self.percentile(direct, 0.50), Self.percentile(direct, 0.99))
        return BenchRow(
            what: "session lock: ActiveChanged(true) → keys discarded, \(handles) dirty complete handles (p50 / p99 of \(locks))",
            store: "\(Self.milliseconds(p50)) / \(Self.milliseconds(p99))",
            baseline: "device.lock() called directly: \(Self.milliseconds(directP50)) / \(Self.milliseconds(directP99))",
            // The target is the signal's path; with dirty handles their flush (fsync) is the same as a direct lock's.
            ratio: nil, target: handles == 0 ? "p99 ≤ 50 ms" : "information", met: handles == 0 ? p99 <= .milliseconds(50) : nil,
            note: handles == 0 ? "from the signal sent to the lock done: keys wiped" : "the handles' flush (fsync) is most of it, as in the direct lock")
    }

    static func percentile(_ values: [Duration], _ fraction: Double) -> Duration {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .zero }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
    }

    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(format: "%.2f ms", (Double(seconds) + Double(attoseconds) / 1e18) * 1000)
    }
}

/// A `dbus-daemon` of session type on a socket in `directory`, for the bench alone.
final class PrivateSessionBus: Sendable {
    let address: String
    private let process: Process

    init(in directory: URL) throws {
        let configuration = directory.appendingPathComponent("bench-bus.conf")
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(directory.path)/bench-bus</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>
            """.write(to: configuration, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(configuration.path)", "--print-address", "--nofork", "--nopidfile"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw DataProtectionError(.ioFailure, "The session-lock bench needs dbus-daemon: \(error.localizedDescription).")
        }
        var received = Data()
        while !received.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            received.append(chunk)
        }
        address = String(decoding: received, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        self.process = process
        guard !address.isEmpty else {
            stop()
            throw DataProtectionError(.ioFailure, "dbus-daemon printed no address.")
        }
    }

    /// Kills the daemon (SIGKILL: a SIGTERM ignored by this process would be ignored by it too) and waits for it.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
