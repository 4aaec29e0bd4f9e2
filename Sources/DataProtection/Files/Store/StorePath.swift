/// A validated store path: `/`-separated names relative to the store root
/// (a leading `/` also means the root; `/` alone is the root itself).
struct StorePath: Hashable, Sendable, CustomStringConvertible {
    /// The longest name, in UTF-8 bytes, that still fits a file-system name (255 bytes)
    /// once encrypted (`base64url(24 + name + 16)`) and suffixed `.j` for its journal.
    static let maximumNameLength = 149

    let components: [String]

    var isRoot: Bool { components.isEmpty }
    var name: String? { components.last }
    var parent: StorePath { StorePath(components: Array(components.dropLast())) }
    var description: String { "/" + components.joined(separator: "/") }

    init(components: [String]) { self.components = components }

    /// Parses `path`. As in POSIX paths, `.` components and the empty components of
    /// repeated or trailing `/` are ignored (`./Documents//a.txt/` is `Documents/a.txt`).
    ///
    /// - Throws: `invalidPath` for an empty path, a `..` component, a NUL byte, or a
    ///   name too long to encrypt.
    init(_ path: String) throws(DataProtectionError) {
        guard !path.isEmpty else { throw Self.invalid(path, "the path is empty") }
        guard !path.utf8.contains(0) else { throw Self.invalid(path, "the path contains a NUL byte") }
        let components = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init).filter { $0 != "." }
        for component in components {
            switch component {
            case "..": throw Self.invalid(path, "the path has a `..` component")
            default:
                guard component.utf8.count <= Self.maximumNameLength else {
                    throw Self.invalid(path, "the name \"\(component.prefix(20))…\" is longer than \(Self.maximumNameLength) bytes")
                }
            }
        }
        self.components = components
    }

    func appending(_ name: String) -> StorePath { StorePath(components: components + [name]) }

    private static func invalid(_ path: String, _ reason: String) -> DataProtectionError {
        DataProtectionError(.invalidPath, "Invalid path \"\(path.replacingOccurrences(of: "\0", with: "\\0"))\": \(reason).",
                            hint: "Paths are `/`-separated names inside the store, e.g. Documents/notes.txt; `..` is not allowed.")
    }
}

extension ProtectedStore {
    /// The canonical form of a store path: a leading `/`, then the names (`Documents/a.db`
    /// becomes `/Documents/a.db`; `/` alone is the root).
    ///
    /// - Throws: `invalidPath` for a path no operation would accept.
    public static func standardizedPath(_ path: String) throws(DataProtectionError) -> String {
        try StorePath(path).description
    }
}
