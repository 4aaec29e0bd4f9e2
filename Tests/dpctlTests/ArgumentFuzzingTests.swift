import Foundation
import Testing
@testable import dpctl

/// The `cli` fuzz corpus (seeds and reproducers of fixed crashes) replayed
/// through the fuzz entry point without a sanitizer.
@Suite("dpctl argument fuzz corpus")
struct ArgumentFuzzingTests {
    @Test("every checked-in command line parses or fails cleanly")
    func replay() throws {
        let directory = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/Corpus/cli")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(names.count >= 10)
        for name in names {
            ArgumentFuzzing.check(try Data(contentsOf: directory.appendingPathComponent(name)))
        }
    }
}
