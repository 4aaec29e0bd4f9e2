import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// One owner per device directory (`semantics.md`, "Processes and the agent"):
/// a second opener in this process waits, then gets `storeBusy`; the owner's
/// going away lets the next opener in.
@Suite("Store ownership")
struct OwnershipLockTests {
    private func configuration(timeout: Duration) -> DeviceConfiguration {
        var configuration = DeviceConfiguration.testing()
        configuration.ownershipTimeout = timeout
        return configuration
    }

    @Test("a second Device in the process that owns the directory fails at once with storeBusy, saying so")
    func secondDeviceInProcessIsBusyAtOnce() throws {
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let owner = try Device(directory: directory, clock: VirtualClock(), configuration: configuration(timeout: .zero))
            let started = ContinuousClock.now
            let error = outcome {
                _ = try Device(directory: directory, clock: VirtualClock(), configuration: configuration(timeout: .seconds(20)))
            }
            #expect(error.errorCode == .storeBusy)
            if case .failure(let failure) = error {
                #expect(failure.message.contains("This process already owns the device"), "\(failure)")
                #expect(failure.hint?.contains("--wait") == false, "a hint about waiting, for a wait that cannot end: \(failure)")
            }
            #expect(ContinuousClock.now - started < .seconds(5), "it waited for itself")
            // The owner is untouched by the refused opener.
            try owner.unlock()
            #expect(owner.state == .unlocked)
        }
    }

    @Test("a second ProtectedStore on an owned directory fails with storeBusy, and creates nothing")
    func secondStoreIsBusy() throws {
        try withScratchDirectory { root in
            let store = try ProtectedStore(directory: root, clock: VirtualClock(), configuration: configuration(timeout: .zero))
            try store.device.unlock()
            try store.write(Data("kept".utf8), to: "a.txt")
            let error = outcome {
                _ = try ProtectedStore(directory: root, clock: VirtualClock(), configuration: configuration(timeout: .zero))
            }
            #expect(error.errorCode == .storeBusy)
            #expect(try store.contents(atPath: "a.txt") == Data("kept".utf8))
        }
    }

    @Test("when the owner is released, the next opener owns the directory and sees its state")
    func releaseHandsOver() throws {
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            var owner: Device? = try Device(directory: directory, clock: VirtualClock(), configuration: configuration(timeout: .zero))
            try owner?.unlock()
            try owner?.setPasscode("1234")
            owner = nil
            let next = try Device(directory: directory, clock: VirtualClock(), configuration: configuration(timeout: .zero))
            #expect(next.hasPasscode)
        }
    }

    @Test("once the owner relinquishes the directory, the same process opens it again at once")
    func relinquishedDirectoryReopens() throws {
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let owner = try Device(directory: directory, clock: VirtualClock(), configuration: configuration(timeout: .zero))
            owner.relinquishOwnership()
            let next = try Device(directory: directory, clock: VirtualClock(), configuration: configuration(timeout: .zero))
            #expect(next.state == .booted)
        }
    }

    @Test("only the owner cleans debris: a refused opener leaves another writer's temporaries alone")
    func debrisIsTheOwners() throws {
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let owner = try Device(directory: directory, clock: VirtualClock(), configuration: configuration(timeout: .zero))
            // A temporary of a write the owner has in flight.
            let inFlight = directory.appendingPathComponent(AtomicFileWriter.temporaryPrefix + "attempts-0123")
            try Data("in flight".utf8).write(to: inFlight)
            let error = outcome {
                _ = try Device(directory: directory, clock: VirtualClock(), configuration: configuration(timeout: .zero))
            }
            #expect(error.errorCode == .storeBusy)
            #expect(FileManager.default.fileExists(atPath: inFlight.path))
            // Its next owner, once the first is gone, does clean it.
            owner.relinquishOwnership()
            _ = try Device(directory: directory, clock: VirtualClock(), configuration: configuration(timeout: .zero))
            #expect(!FileManager.default.fileExists(atPath: inFlight.path))
        }
    }

    @Test("a negative timeout is refused as invalidArgument")
    func negativeTimeout() throws {
        try withScratchDirectory { root in
            let error = outcome {
                _ = try Device(directory: root, clock: VirtualClock(), configuration: configuration(timeout: .seconds(-1)))
            }
            #expect(error.errorCode == .invalidArgument)
        }
    }
}
