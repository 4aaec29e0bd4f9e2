import DataProtectionScenarios
import Foundation

/// The scenario language: whole files, and the same bytes line by line as
/// `dpctl shell` statements.
enum ScenarioFuzzing {
    static func run(_ data: Data) {
        _ = try? ScenarioParser.parse(data, file: "fuzz.scenario")
        var handles: Set<String> = []
        for line in data.split(separator: UInt8(ascii: "\n"), maxSplits: 64) {
            _ = try? ScenarioParser.parseStatement(String(decoding: line, as: UTF8.self), handles: &handles)
        }
    }
}
