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
        guard !ReservedStoreArea.contains(components) || ReservedStoreArea.isOpen else {
            throw Self.invalid(path, "\(ReservedStoreArea.itemsDirectory) is reserved for the store's keychain items (use the items API or `dpctl item`)")
        }
        self.components = components
    }

    func appending(_ name: String) -> StorePath { StorePath(components: components + [name]) }

    /// The most names the path of a new entry may have (`Keys/file-format.md` §11.1).
    static let maximumDepth = 32
    /// The longest on-disk path below the store root a new entry may have: its encrypted
    /// names, each with its `/` (`Keys/file-format.md` §11.1). With the longest name of an
    /// entry's journal or temporaries beside it, every path the store uses stays under
    /// `PATH_MAX` (4096) for a root up to about 1,900 bytes long.
    static let maximumOnDiskLength = 2048

    /// The length of an on-disk name for a name of `byteCount` UTF-8 bytes: base64url, without
    /// padding, of a 24-byte nonce, the name and a 16-byte tag (`Keys/file-format.md` §10).
    static func encryptedNameLength(_ byteCount: Int) -> Int { (4 * (40 + byteCount) + 2) / 3 }

    /// The on-disk length of this path below the store root.
    var onDiskLength: Int { components.reduce(0) { $0 + 1 + Self.encryptedNameLength($1.utf8.count) } }

    /// What the store adds under `PATH_MAX` beyond an entry's own on-disk path: the longest
    /// name beside or inside it (a `dpdir` being replaced, a journal's temporary copy) and a NUL.
    static let pathRoom = 40
    /// The longest path the kernel takes (`PATH_MAX`, its NUL included).
    static let pathMaximum = 4096

    /// Refuses (`invalidPath`) to create an entry at this path, with a tree of `depthBelow` more
    /// levels and `lengthBelow` more on-disk bytes under it (a directory being moved here),
    /// when it would pass ``maximumDepth`` or ``maximumOnDiskLength``, or when, below a root
    /// of `rootByteCount` bytes, a path the store uses for it would pass `PATH_MAX`: beyond
    /// them, paths outgrow what the kernel takes (`ENAMETOOLONG`), and an entry made could be
    /// neither listed nor removed.
    func requireCreatable(rootByteCount: Int, depthBelow: Int = 0, lengthBelow: Int = 0) throws(DataProtectionError) {
        let depth = components.count + depthBelow
        guard depth <= Self.maximumDepth else {
            throw Self.invalid(description, "it would be \(depth) directories deep; a store allows \(Self.maximumDepth)")
        }
        let length = onDiskLength + lengthBelow
        guard length <= Self.maximumOnDiskLength else {
            throw Self.invalid(description, "its encrypted names would take \(length) bytes on disk; a store allows \(Self.maximumOnDiskLength) (shorter or fewer names fit)")
        }
        guard rootByteCount + length + Self.pathRoom <= Self.pathMaximum else {
            throw Self.invalid(description, "below the store's root (\(rootByteCount) bytes) its path on disk would pass the system's limit of \(Self.pathMaximum) bytes")
        }
    }

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
