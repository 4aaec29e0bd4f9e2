import Foundation
import Testing
@testable import DataProtection

/// Power cuts inside every store operation: the operations of ``IOFaultTests``,
/// each run on a ``CrashingFileSystem`` that cuts the power at its k-th mutating
/// call, for every k and both loss modes (unsynced data lost;
/// unsynced data-file pages torn, each kept or lost; the SIGKILL harness covers
/// the case where nothing is lost). After the restart on the
/// real file system, the store must show the old state, the new one (or the
/// documented halfway point of a multi-step operation), unlock with the old or
/// the new passcode, and leave no debris.
@Suite("Power cuts at every step of every store operation")
struct PowerCutTests {
    static let modes: [CrashingFileSystem.Mode] = [.loseUnsynced(.truncate), .loseUnsynced(.garbage)]

    @Test("a power cut at every mutating call", arguments: IOFaultTests.operations)
    func powerCutAtEveryStep(_ operation: IOFaultTests.Operation) throws {
        let counter = CrashingFileSystem(mode: .keepEverything)
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let (store, handle) = try IOFaultTests.prepare(root, counter)
        let old = try StoreSnapshot.take(store)
        counter.arm(crashAt: nil)
        try operation.run(store, handle)
        let steps = counter.operations
        let new = try StoreSnapshot.take(store)
        try handle.close()
        var halfway = old
        halfway.items.merge(operation.intermediate) { $1 }
        let allowed = [old, new, halfway]

        var cuts = 0
        // Nothing lost is the SIGKILL harness's case: here the two ways of losing unsynced data.
        for mode in Self.modes {
            for step in 1...steps {
                let fileSystem = CrashingFileSystem(mode: mode)
                let root = IOFaultTests.scratch()
                defer { try? FileManager.default.removeItem(at: root) }
                let (store, handle) = try IOFaultTests.prepare(root, fileSystem)
                fileSystem.arm(crashAt: step)
                let result = outcome { try operation.run(store, handle) }
                guard fileSystem.hasCrashed else {
                    Issue.record("\(operation.name), \(mode), step \(step): no crash (\(result))")
                    continue
                }
                cuts += 1
                let context = "\(operation.name), \(mode), power cut at step \(step) of \(steps)"
                // The restart: a new device and store on the real file system (the old objects are dead).
                let restarted = try ScratchStore.restarted(at: root, replacing: store)
                let device = restarted.device
                let unlocked = [IOFaultTests.passcode, IOFaultTests.newPasscode].contains { (try? device.unlock(passcode: $0)) != nil }
                #expect(unlocked, "\(context): the old or the new passcode unlocks")
                let seen = outcome { try StoreSnapshot.take(restarted) }
                #expect(allowed.map { Result<StoreSnapshot, DataProtectionError>.success($0) }.contains(seen),
                        "\(context): the store shows \(seen); old \(old); steps \(counter.log)")
                #expect(debris(under: root).isEmpty, "\(context): debris \(debris(under: root))")
                withExtendedLifetime((store, handle)) {}
            }
        }
        print("POWER-CUTS \(operation.name): \(cuts) power cuts (\(steps) steps x \(Self.modes.count) modes)")
        #expect(cuts == steps * Self.modes.count)
    }
}
