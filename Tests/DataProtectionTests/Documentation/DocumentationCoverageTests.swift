import Foundation
import Testing

/// Every public declaration of the libraries has a `///` comment (conformances to standard
/// protocols, whose documentation DocC takes from the protocol, aside). `dpctl` and the
/// benchmark workloads are not libraries and are not checked.
@Suite("Documentation coverage")
struct DocumentationCoverageTests {
    static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources")

    static let declarationPattern = (
        #"^\s*(public|open)\s+(?!extension\b)((static|final|convenience|override|nonisolated|mutating)\s+)*(func|var|let|init|struct|class|enum|protocol|typealias|subscript|case|actor)\b"#)
    static let conformancePattern = (
        #"\b(description|debugDescription|encode\(to|init\(from|hash\(into|makeAsyncIterator|next\(\)|errorDescription|recoverySuggestion|init\(nilLiteral|init\?\(argument|defaultValueDescription|typealias Element|typealias AsyncIterator|init\(stringLiteral)|func == "#)

    @Test("every public declaration of the library targets has a /// comment")
    func everyPublicDeclarationIsDocumented() throws {
        let declaration = try Regex(Self.declarationPattern)
        let conformance = try Regex(Self.conformancePattern)
        var undocumented: [String] = []
        let walker = FileManager.default.enumerator(at: Self.sources, includingPropertiesForKeys: nil)
        var checked = 0
        while let url = walker?.nextObject() as? URL {
            let path = url.path
            guard path.hasSuffix(".swift"), !path.contains("/Sources/dpctl/"), !path.contains("/Sources/StoreBenchmarking/") else { continue }
            let lines = try String(contentsOf: url, encoding: .utf8).components(separatedBy: "\n")
            for (index, line) in lines.enumerated() where line.contains(declaration) && !line.contains(conformance) {
                checked += 1
                var previous = index - 1
                while previous >= 0, lines[previous].trimmingCharacters(in: .whitespaces).hasPrefix("@") { previous -= 1 }
                let above = previous >= 0 ? lines[previous].trimmingCharacters(in: .whitespaces) : ""
                if !above.hasPrefix("///") && !above.hasSuffix("*/") {
                    undocumented.append("\(url.lastPathComponent):\(index + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(checked > 300, "the scan found only \(checked) declarations: is it reading the sources?")
        #expect(undocumented.isEmpty, "undocumented public declarations:\n\(undocumented.joined(separator: "\n"))")
    }
}
