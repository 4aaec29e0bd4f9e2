import Foundation

/// A private system bus with python-dbusmock's `logind` (one session, `c1`) and a private
/// session bus with its `gnome_screensaver`, each its own `dbus-daemon`, driven through
/// `gdbus`. Everything is killed at the end.
package final class SessionBusFixture: @unchecked Sendable {
    package let directory: URL
    package private(set) var systemAddress = ""
    package private(set) var sessionAddress = ""
    /// The mocks, then the buses: stopped in the reverse order.
    private var mocks: [Process] = []
    private var buses: [PrivateBus] = []
    package static let sessionIdentifier = "c1"
    package static let sessionPath = "/org/freedesktop/login1/session/c1"

    /// Whether the tools are there (`dbus-daemon`, `gdbus`, Debian's python3 with dbusmock).
    package static var available: Bool {
        ["/usr/bin/dbus-daemon", "/usr/bin/gdbus", "/usr/bin/python3"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    package init(system: Bool = true, session: Bool = true) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("dpbus-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        if system {
            let bus = try PrivateBus(type: "system")
            buses.append(bus)
            systemAddress = bus.address
            try startMock(["--system", "--template", "logind"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address],
                          address: bus.address, name: "org.freedesktop.login1")
            try call(systemAddress, "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.AddSession",
                     [Self.sessionIdentifier, "seat0", "\(getuid())", "user", "true"])
        }
        if session {
            let bus = try PrivateBus(type: "session")
            buses.append(bus)
            sessionAddress = bus.address
            try startMock(["--session", "--template", "gnome_screensaver"], environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address],
                          address: bus.address, name: "org.gnome.ScreenSaver")
        }
    }

    deinit {
        for process in mocks.reversed() where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        for bus in buses.reversed() { bus.kill() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Kills the system bus's daemon (SIGKILL).
    package func killSystemBus() {
        buses.first { $0.address == systemAddress }?.kill()
    }

    // MARK: - Driving the mocks

    /// logind's session emits `Lock`.
    package func lockSession() throws { try call(systemAddress, "org.freedesktop.login1", Self.sessionPath, "org.freedesktop.login1.Session.Lock") }
    /// logind's session emits `Unlock`.
    package func unlockSession() throws { try call(systemAddress, "org.freedesktop.login1", Self.sessionPath, "org.freedesktop.login1.Session.Unlock") }
    /// logind's session sets `LockedHint` (PropertiesChanged).
    package func setLockedHint(_ locked: Bool) throws {
        try call(systemAddress, "org.freedesktop.login1", Self.sessionPath, "org.freedesktop.login1.Session.SetLockedHint", ["\(locked)"])
    }
    /// logind's manager emits `PrepareForSleep(start)`.
    package func prepareForSleep(_ start: Bool) throws {
        try call(systemAddress, "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.EmitSignal",
                 ["org.freedesktop.login1.Manager", "PrepareForSleep", "b", "[<\(start)>]"])
    }
    /// GNOME's screensaver turns on or off (`ActiveChanged`).
    package func setScreensaver(_ active: Bool) throws {
        try call(sessionAddress, "org.gnome.ScreenSaver", "/org/gnome/ScreenSaver", "org.gnome.ScreenSaver.SetActive", ["\(active)"])
    }

    /// Emits `signal` (interface.member, with a boolean argument when `argument` is given) from `path`, by a
    /// connection of its own (not the mock's), through python-dbus (`gdbus emit` sends before its hello is answered).
    package func emit(_ address: String, _ path: String, _ signal: String, _ argument: Bool? = nil) throws {
        let dot = signal.lastIndex(of: ".")!
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", """
            import dbus, dbus.lowlevel, sys
            bus = dbus.bus.BusConnection(sys.argv[1])
            message = dbus.lowlevel.SignalMessage(sys.argv[2], sys.argv[3], sys.argv[4])
            if len(sys.argv) > 5: message.append(sys.argv[5] == "true", signature="b")
            bus.send_message(message)
            bus.flush()
            """, address, path, String(signal[..<dot]), String(signal[signal.index(after: dot)...])] + (argument.map { ["\($0)"] } ?? [])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw SessionBusFailure("emitting \(signal) failed") }
    }

    /// `gdbus call` of `method` (interface.member) on `path` of `destination`; fails on an error reply.
    @discardableResult
    package func call(_ address: String, _ destination: String, _ path: String, _ method: String, _ arguments: [String] = []) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/gdbus")
        process.arguments = ["call", "--address", address, "--dest", destination, "--object-path", path, "--method", method] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else { throw SessionBusFailure("gdbus call \(method): \(text)") }
        return text
    }

    // MARK: - Starting

    private func startMock(_ arguments: [String], environment: [String: String], address: String, name: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-m", "dbusmock"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        mocks.append(process)
        let deadline = Date(timeIntervalSinceNow: 20)
        while Date() < deadline {
            let owned = try? call(address, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", [name])
            if owned?.contains("true") == true { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw SessionBusFailure("\(name) did not appear on the bus")
    }
}

/// A private bus or a mock that did not come up.
package struct SessionBusFailure: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
