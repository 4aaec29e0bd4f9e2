import Foundation
import Testing
@testable import DataProtection

// Helpers for the store tests: a store per test in its own scratch directory,
// on a virtual clock, and the expected availability of each class in each state.

/// The passcode every store test sets.
let storeTestPasscode = "1234"

/// A store in a fresh scratch directory on a virtual clock; the directory is
/// removed by ``remove()`` (call it in a `defer`).
final class StoreFixture {
    let root: URL
    let clock = VirtualClock()
    let configuration: DeviceConfiguration
    let store: ProtectedStore
    var device: Device { store.device }
    /// Where the store keeps its (encrypted) entries on disk.
    var filesDirectory: URL { root.appendingPathComponent("files", isDirectory: true) }

    /// A new store; unlocked with ``storeTestPasscode`` set unless `passcode` is false.
    init(grace: Duration = .zero, inactivity: Duration = .seconds(48 * 3600), passcode: Bool = true) throws {
        // Short: every store operation walks the path (and debug builds of swift-system pay per character).
        root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dps-\(UUID().uuidString.prefix(13))", isDirectory: true)
        configuration = DeviceConfiguration(gracePeriod: grace, inactivityPeriod: inactivity, passcodeCost: .minimal)
        store = try ProtectedStore(directory: root, clock: clock, configuration: configuration)
        if passcode {
            try store.device.unlock()
            try store.device.setPasscode(storeTestPasscode)
        }
    }

    func remove() { try? FileManager.default.removeItem(at: root) }

    func unlock() throws { try device.unlock(passcode: storeTestPasscode) }

    /// Locks and lets `after` pass on the clock.
    func lock(after: Duration = .zero) throws {
        try device.lock()
        if after > .zero { clock.advance(by: after) }
    }
}

/// Runs `body` with a fresh store, removing its directory afterwards.
@discardableResult
func withStore<R>(
    grace: Duration = .zero, inactivity: Duration = .seconds(48 * 3600), passcode: Bool = true,
    _ body: (StoreFixture) throws -> R
) throws -> R {
    let fixture = try StoreFixture(grace: grace, inactivity: inactivity, passcode: passcode)
    defer { fixture.remove() }
    return try body(fixture)
}

/// Expects `body` to throw a ``DataProtectionError`` with `code`.
func expectStoreError(
    _ code: DataProtectionError.Code, _ comment: @autoclosure () -> String = "",
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("expected \(code.rawValue), but it succeeded. \(comment())", sourceLocation: sourceLocation)
    } catch let error as DataProtectionError {
        #expect(error.code == code, "\(error) \(comment())", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code.rawValue), got \(error). \(comment())", sourceLocation: sourceLocation)
    }
}

/// What `body` returned, or the ``DataProtectionError`` it threw.
func outcome<R>(_ body: () throws -> R) -> Result<R, DataProtectionError> {
    do {
        return .success(try body())
    } catch let error as DataProtectionError {
        return .failure(error)
    } catch {
        return .failure(DataProtectionError(.invalidArgument, "unexpected error type: \(error)"))
    }
}

/// Deterministic pseudo-random bytes (SplitMix64), so failures reproduce.
func patternBytes(_ count: Int, seed: UInt64) -> Data {
    var state = seed &+ 0x9E37_79B9_7F4A_7C15
    var bytes = [UInt8](repeating: 0, count: count)
    var z: UInt64 = 0
    for index in 0..<count {
        if index % 8 == 0 {
            state &+= 0x9E37_79B9_7F4A_7C15
            z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
        }
        bytes[index] = UInt8(truncatingIfNeeded: z >> ((index % 8) * 8))
    }
    return Data(bytes)
}

/// A small deterministic generator for model tests.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The lock states of the class × state table.
enum TableState: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// Started, never unlocked since boot.
    case booted
    case unlocked
    /// Locked, inside the grace period.
    case lockedInGrace
    /// Locked, the grace period over (A and B secret keys gone).
    case locked
    /// Locked for the inactivity period (CX key gone too).
    case lockedInactive

    var testDescription: String { rawValue }
}

extension ProtectionClass {
    /// Whether an existing, closed file of this class can be opened in `state` (semantics.md table).
    func opensExisting(in state: TableState) -> Bool {
        switch (self, state) {
        case (.none, _): true
        case (_, .booted): false
        case (_, .unlocked), (_, .lockedInGrace): true
        case (.complete, _), (.completeUnlessOpen, _): false
        case (.completeUntilFirstUserAuthentication, _): true
        case (.completeWhenUserInactive, .locked): true
        case (.completeWhenUserInactive, _): false
        }
    }

    /// Whether a new file of this class can be created in `state`.
    func createsNew(in state: TableState) -> Bool {
        self == .completeUnlessOpen || opensExisting(in: state)
    }

    /// Whether a handle opened while unlocked still reads and writes in `state`.
    func handleWorks(in state: TableState) -> Bool {
        self == .completeUnlessOpen || opensExisting(in: state)
    }

    var letter: String {
        switch self {
        case .complete: "A"
        case .completeUnlessOpen: "B"
        case .completeUntilFirstUserAuthentication: "C"
        case .completeWhenUserInactive: "CX"
        case .none: "D"
        }
    }
}
