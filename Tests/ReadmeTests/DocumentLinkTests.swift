import Foundation
import Testing

/// Every document of the repository refers only to files that exist: the README, `Docs/`,
/// `Keys/` and the DocC catalogs. A relative link must name an existing file or folder (and
/// an existing heading, when it has a `#fragment` into Markdown); a Markdown file named in
/// backquotes (`semantics.md`) must exist somewhere in the repository.
@Suite("Document links")
struct DocumentLinkTests {
    static let root = ReadmeTests.root

    /// The Markdown documents checked.
    static func documents() throws -> [URL] {
        var documents = [root.appendingPathComponent("README.md")]
        for folder in ["Docs", "Keys", "Sources", "Benchmarks"] {
            let walker = FileManager.default.enumerator(at: root.appendingPathComponent(folder), includingPropertiesForKeys: nil)
            while let url = walker?.nextObject() as? URL {
                if url.pathExtension == "md" { documents.append(url) }
            }
        }
        return documents
    }

    /// GitHub's anchor for a heading: lowercased, punctuation but `-` and `_` dropped, spaces as `-`.
    static func anchor(_ heading: String) -> String {
        String(heading.lowercased().compactMap { character -> Character? in
            if character == " " { return "-" }
            if character.isLetter || character.isNumber || character == "-" || character == "_" { return character }
            return nil
        })
    }

    static func anchors(of markdown: String) -> Set<String> {
        var anchors = Set<String>()
        var fenced = false
        for line in markdown.split(separator: "\n") {
            if line.hasPrefix("```") { fenced.toggle() }
            guard !fenced, line.hasPrefix("#") else { continue }
            anchors.insert(anchor(String(line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces))))
        }
        return anchors
    }

    @Test("every relative link resolves, to a heading too when it names one")
    func linksResolve() throws {
        let link = try Regex(#"\]\(([^)\s]+)\)"#)
        var broken: [String] = []
        var checked = 0
        for document in try Self.documents() {
            let text = try String(contentsOf: document, encoding: .utf8)
            for match in text.matches(of: link) {
                let target = String(text[match.range].dropFirst(2).dropLast())
                if target.contains("://") || target.hasPrefix("mailto:") || target.hasPrefix("doc:") { continue }
                checked += 1
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let file = parts[0].isEmpty ? document : document.deletingLastPathComponent().appendingPathComponent(String(parts[0]))
                let name = document.path.replacingOccurrences(of: Self.root.path + "/", with: "")
                guard FileManager.default.fileExists(atPath: file.path) else {
                    broken.append("\(name): \(target) (no such file)")
                    continue
                }
                if parts.count == 2, file.pathExtension == "md" {
                    let anchors = Self.anchors(of: try String(contentsOf: file, encoding: .utf8))
                    if !anchors.contains(String(parts[1])) { broken.append("\(name): \(target) (no such heading)") }
                }
            }
        }
        #expect(checked > 20, "only \(checked) links found: is the scan reading the documents?")
        #expect(broken.isEmpty, "broken links:\n\(broken.joined(separator: "\n"))")
    }

    @Test("every Markdown file named in backquotes exists in the repository")
    func namedDocumentsExist() throws {
        var present = Set<String>()
        let walker = FileManager.default.enumerator(at: Self.root, includingPropertiesForKeys: nil)
        while let url = walker?.nextObject() as? URL {
            if url.lastPathComponent.hasPrefix(".") { walker?.skipDescendants(); continue }
            if url.pathExtension == "md" { present.insert(url.lastPathComponent) }
        }
        let named = try Regex(#"`([A-Za-z0-9_./-]+\.md)`"#)
        var missing: [String] = []
        for document in try Self.documents() {
            let text = try String(contentsOf: document, encoding: .utf8)
            for match in text.matches(of: named) {
                let file = String(text[match.range].dropFirst().dropLast())
                if !present.contains((file as NSString).lastPathComponent) {
                    missing.append("\(document.lastPathComponent): \(file)")
                }
            }
        }
        #expect(present.contains("semantics.md") && present.contains("scenario-language.md"))
        #expect(missing.isEmpty, "documents name files the repository does not have:\n\(missing.joined(separator: "\n"))")
    }
}
