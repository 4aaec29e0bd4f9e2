import Foundation
import Testing
@testable import DataProtection

/// Power cuts inside a run of chained commits (Keys/file-format.md §8.2, "Chained commits"):
/// commits that stand on their journal alone, the header and the records they wrote in place
/// made durable only at the checkpoint. A handle makes a series of commits, each acknowledged
/// by `synchronize()` returning; a ``CrashingFileSystem`` cuts the power at its k-th mutating
/// call, for every k and both ways of losing unsynced data. After the restart the file must
/// hold exactly what the last acknowledged commit left, or what the commit in flight would
/// have (never an older commit, never a mixture), and no journal may be left behind.
@Suite("Power cuts in a chain of commits")
struct ChainedCommitPowerCutTests {
    /// One commit of the series, on the handle of `/a.txt`, and what it makes of the content.
    struct Step: Sendable {
        let run: @Sendable (ProtectedFileHandle) throws -> Void
        let apply: @Sendable (inout Data) -> Void

        /// Writes `data` at `offset` and synchronizes.
        static func write(_ data: Data, at offset: Int) -> Step {
            Step(run: { handle in
                try handle.write(contentsOf: data, atOffset: UInt64(offset))
                try handle.synchronize()
            }, apply: { content in
                if content.count < offset + data.count { content.append(Data(count: offset + data.count - content.count)) }
                content.replaceSubrange(offset..<offset + data.count, with: data)
            })
        }

        /// Truncates to `size` and synchronizes (a shrink: not chained, it writes headers).
        static func truncate(to size: Int) -> Step {
            Step(run: { handle in
                try handle.truncate(atOffset: UInt64(size))
                try handle.synchronize()
            }, apply: { content in content = content.prefix(size) })
        }
    }

    /// A named series of commits.
    struct Series: Sendable, CustomTestStringConvertible {
        let name: String
        let steps: [Step]
        var testDescription: String { name }
    }

    /// Overwrites of committed chunks (twice the same one), small growths that regrow the last
    /// partial chunk, a shrink inside the chain, and commits after it (a new chain).
    static let mixed = Series(name: "mixed", steps: [
        .write(patternBytes(100, seed: 31), at: 500),
        .write(patternBytes(3_000, seed: 32), at: 20_000),
        .write(patternBytes(5_000, seed: 33), at: 40_000),
        .write(patternBytes(200, seed: 34), at: 450),
        .write(patternBytes(30_000, seed: 35), at: 45_000),
        .truncate(to: 30_000),
        .write(patternBytes(50, seed: 36), at: 10),
        .write(patternBytes(200, seed: 37), at: 30_000),
    ])

    /// More commits than a chain holds: the checkpoint inside a commit, then a new chain
    /// written over the old one in the same journal file.
    static let long = Series(name: "longer than a chain", steps: (0..<Int(CrashingFileSystem.chainLimit.commits) + 3).map { round in
        round % 4 == 3 ? .write(patternBytes(700, seed: UInt64(40 + round)), at: IOFaultTests.aText.count + round * 700)
            : .write(patternBytes(64, seed: UInt64(40 + round)), at: (round * 5_003) % 40_000)
    })

    @Test("a power cut at every call of a chain of commits: the last acknowledged commit or the next",
          arguments: [mixed, long])
    func powerCutInAChain(_ series: Series) throws {
        var states = [IOFaultTests.aText]
        for step in series.steps {
            var next = states.last!
            step.apply(&next)
            states.append(next)
        }
        // Counting run: how many mutating calls the series makes, the close included.
        let counter = CrashingFileSystem(mode: .keepEverything)
        let countRoot = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: countRoot) }
        let (countStore, countHandle) = try IOFaultTests.prepare(countRoot, counter)
        counter.arm(crashAt: nil)
        for step in series.steps { try step.run(countHandle) }
        try countHandle.close()
        let calls = counter.operations
        #expect(try countStore.contents(atPath: "/a.txt") == states.last!)

        var cuts = 0
        for mode in PowerCutTests.modes {
            for call in 1...calls {
                let fileSystem = CrashingFileSystem(mode: mode)
                let root = IOFaultTests.scratch()
                defer { try? FileManager.default.removeItem(at: root) }
                let (store, handle) = try IOFaultTests.prepare(root, fileSystem)
                fileSystem.arm(crashAt: call)
                var acknowledged = 0
                do {
                    for step in series.steps {
                        try step.run(handle)
                        acknowledged += 1
                    }
                    try handle.close()
                } catch {
                    #expect(CrashingFileSystem.isCrash(error), "\(series.name), call \(call): \(error)")
                }
                guard fileSystem.hasCrashed else {
                    Issue.record("\(series.name), \(mode), call \(call): no crash")
                    continue
                }
                cuts += 1
                let context = "\(series.name), \(mode), power cut at call \(call) of \(calls), \(acknowledged) commits acknowledged"
                let restarted = try ScratchStore.restarted(at: root, replacing: store)
                try restarted.device.unlock(passcode: IOFaultTests.passcode)
                let content = try restarted.contents(atPath: "/a.txt")
                let allowed = states[acknowledged...min(acknowledged + 1, states.count - 1)]
                #expect(allowed.contains(content),
                        "\(context): \(content.count) bytes, matching commit \(states.lastIndex(of: content).map(String.init) ?? "none"); calls \(fileSystem.log.suffix(6))")
                #expect(debris(under: root).isEmpty, "\(context): debris \(debris(under: root))")
                let journals = (try FileManager.default.subpathsOfDirectory(atPath: root.path)).filter { $0.hasSuffix(FileJournal.suffix) }
                #expect(journals.isEmpty, "\(context): journals left after the file was read: \(journals)")
                withExtendedLifetime((store, handle)) {}
            }
        }
        print("CHAINED-POWER-CUTS \(series.name): \(series.steps.count) commits, \(cuts) power cuts (\(calls) calls x \(PowerCutTests.modes.count) modes)")
        #expect(cuts == calls * PowerCutTests.modes.count)
    }
}
