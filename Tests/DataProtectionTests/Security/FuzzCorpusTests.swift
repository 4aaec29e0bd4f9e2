import DataProtectionFuzzing
import Foundation
import Testing

/// Every checked-in fuzz input (seeds and the reproducers of fixed crashes,
/// `Tests/Fuzz/Corpus/<target>/`) replayed through the fuzz entry points without
/// a sanitizer: a crash fixed once stays fixed. (The `cli` target: `dpctlTests`.)
@Suite("Fuzz corpus replay")
struct FuzzCorpusTests {
    static let corpusRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/Corpus")

    @Test("every corpus input of the target runs to completion", arguments: FuzzTarget.allCases)
    func replay(_ target: FuzzTarget) throws {
        let directory = Self.corpusRoot.appendingPathComponent(target.rawValue)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(names.count >= 3, "the \(target.rawValue) corpus is missing")
        for name in names {
            let data = try Data(contentsOf: directory.appendingPathComponent(name))
            target.run(data)
        }
    }
}
