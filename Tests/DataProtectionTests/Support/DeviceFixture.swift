import Foundation
import SodiumBridge
import SystemPackage
import Testing
@testable import DataProtection

// Helpers shared by the device, storage and clock tests: a scratch directory
// per test, a device on a virtual clock, and error expectations.

/// A fresh directory for one test, removed when `body` returns (or throws).
@discardableResult
func withScratchDirectory<R>(_ body: (URL) throws -> R) throws -> R {
    let root = try makeScratchDirectory()
    defer { try? FileManager.default.removeItem(at: root) }
    return try body(root)
}

/// A fresh directory for one asynchronous test, removed when `body` returns (or throws).
@discardableResult
func withScratchDirectory<R>(_ body: (URL) async throws -> R) async throws -> R {
    let root = try makeScratchDirectory()
    defer { try? FileManager.default.removeItem(at: root) }
    return try await body(root)
}

private func makeScratchDirectory() throws -> URL {
    let root = FileManager.default.temporaryDirectory
        .appendingPathComponent("dp-tests-\(UUID().uuidString)", isDirectory: true)
    // Explicit 0700: a test that runs with umask 0 (HostilePathTests) must not make this directory
    // writable by others, which the store refuses.
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    return root
}

extension DeviceConfiguration {
    /// The rules under test with the cheapest passcode derivation, so tests stay fast.
    static func testing(
        grace: Duration = .zero,
        inactivity: Duration = .seconds(48 * 3600),
        eraseAfter: Int? = nil
    ) -> DeviceConfiguration {
        DeviceConfiguration(gracePeriod: grace, inactivityPeriod: inactivity,
                            eraseAfterFailedAttempts: eraseAfter, passcodeCost: .minimal,
                            ownershipTimeout: .milliseconds(500))
    }
}

/// A device in a scratch directory, on a virtual clock.
final class DeviceFixture {
    /// The scratch directory (the device lives in its `device` subdirectory).
    let root: URL
    /// The device directory.
    let directory: URL
    let clock: VirtualClock
    let configuration: DeviceConfiguration
    /// The device under test; ``reopen()`` replaces it.
    private(set) var device: Device

    /// A new device; if `passcode` is given, it is unlocked once and the passcode set
    /// (the device is left unlocked). `fileSystem` replaces the real one for this
    /// first device only; ``reopen()`` always uses the real one.
    init(root: URL, configuration: DeviceConfiguration, passcode: String?, fileSystem: (any FileSystem)? = nil) throws {
        self.root = root
        self.directory = root.appendingPathComponent("device", isDirectory: true)
        self.clock = VirtualClock()
        self.configuration = configuration
        // Explicit 0700, as in makeScratchDirectory.
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if let fileSystem {
            self.device = try Device(directory: FilePath(directory.path), clock: clock,
                                     configuration: configuration, fileSystem: fileSystem)
        } else {
            self.device = try Device(directory: directory, clock: clock, configuration: configuration)
        }
        if let passcode {
            try device.unlock()
            try device.setPasscode(passcode)
        }
    }

    /// A process restart: a new `Device` on the same directory and clock.
    @discardableResult
    func reopen(configuration: DeviceConfiguration? = nil) throws -> Device {
        device.relinquishOwnership()
        device = try Device(directory: directory, clock: clock, configuration: configuration ?? self.configuration)
        return device
    }

    /// The path of one of the device files (`uid`, `effaceable`, `keybag`, `attempts`).
    func file(_ name: String) -> URL { directory.appendingPathComponent(name) }

    /// Fingerprints of every keybag slot's key currently in memory.
    func fingerprints() -> [KeybagSlot: Data] {
        var result: [KeybagSlot: Data] = [:]
        for slot in KeybagSlot.allCases {
            result[slot] = device.keyFingerprint(slot)
        }
        return result
    }

    /// Moves the clock to the next instant a passcode attempt is allowed (if any delay applies).
    func waitForNextAttempt() {
        if let allowed = device.nextPasscodeAttemptAllowed { clock.advance(to: allowed) }
    }

    /// Makes `count` counted failed attempts with distinct wrong passcodes,
    /// waiting out each delay first. The device must have a passcode.
    func fail(_ count: Int, prefix: String = "wrong") {
        for index in 0..<count {
            waitForNextAttempt()
            expectError(.incorrectPasscode) { try device.unlock(passcode: "\(prefix)-\(index)") }
        }
    }
}

/// Runs `body` with a fresh device in a scratch directory.
@discardableResult
func withDevice<R>(
    _ configuration: DeviceConfiguration = .testing(), passcode: String? = nil, _ body: (DeviceFixture) throws -> R
) throws -> R {
    try withScratchDirectory { root in
        try body(DeviceFixture(root: root, configuration: configuration, passcode: passcode))
    }
}

/// Expects `body` to throw a ``DataProtectionError`` with `code`, and returns it.
@discardableResult
func expectError(
    _ code: DataProtectionError.Code,
    _ comment: Comment? = nil,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) -> DataProtectionError? {
    do {
        try body()
        Issue.record("expected \(code.rawValue), but it succeeded. \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
        return nil
    } catch let error as DataProtectionError {
        #expect(error.code == code, "\(error) \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected \(code.rawValue), got \(error). \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
        return nil
    }
}

/// Records notifications (through `addObserver`) and lifecycle calls, in one log,
/// with what was available at the moment of each.
final class DeviceEventRecorder: DeviceLifecycleObserver {
    enum Event: Hashable, Sendable, CustomStringConvertible {
        /// A notification, and whether protected data was available while observers ran.
        case notification(DeviceNotification, protectedDataAvailable: Bool)
        /// `deviceWillDiscardKeys(of:)`, and whether all those keys were still in memory.
        case willDiscard(Set<ProtectionClass>, keysPresent: Bool)
        case willRestart(flushing: Bool)
        case willErase

        var description: String {
            switch self {
            case .notification(let note, let available): "\(note)(available: \(available))"
            case .willDiscard(let classes, let present): "willDiscard(\(classes.map(\.rawValue).sorted()), present: \(present))"
            case .willRestart(let flushing): "willRestart(flushing: \(flushing))"
            case .willErase: "willErase"
            }
        }
    }

    private struct State: Sendable {
        var events: [Event] = []
        var observation: DeviceObservation?
    }

    private let state = Locked(State())
    private let device: Device

    /// Starts recording `device`'s notifications and lifecycle calls.
    init(_ device: Device) {
        self.device = device
        device.addLifecycleObserver(self)
        let observation = device.addObserver { [weak self] note in
            guard let self else { return }
            let available = self.device.isProtectedDataAvailable
            self.append(.notification(note, protectedDataAvailable: available))
        }
        state.withLock { $0.observation = observation }
    }

    /// The events so far.
    var events: [Event] { state.withLock { $0.events } }

    /// The notifications so far.
    var notifications: [DeviceNotification] {
        events.compactMap { if case .notification(let note, _) = $0 { note } else { nil } }
    }

    /// Forgets the events so far.
    func reset() { state.withLock { $0.events.removeAll() } }

    private func append(_ event: Event) { state.withLock { $0.events.append(event) } }

    func deviceWillDiscardKeys(of classes: Set<ProtectionClass>) {
        let present = classes.allSatisfy { device.keyFingerprint(KeybagSlot($0)) != nil }
        append(.willDiscard(classes, keysPresent: present))
    }

    func deviceWillRestart(flushing: Bool) { append(.willRestart(flushing: flushing)) }

    func deviceWillErase() { append(.willErase) }
}
