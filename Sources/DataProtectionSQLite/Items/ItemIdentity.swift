import DataProtection

/// The canonical text of an attribute set, an item's identity (`Keys/items.md` §4): the
/// attributes sorted by the UTF-8 bytes of their names, each written as
/// `<name bytes>:<name><value bytes>:<value>` (decimal byte counts). Unambiguous whatever
/// the names and values hold, and decodable back into the set.
enum ItemIdentity {
    static func encode(_ attributes: [String: String]) -> String {
        var text = ""
        for (name, value) in attributes.sorted(by: { Array($0.key.utf8).lexicographicallyPrecedes($1.key.utf8) }) {
            text += "\(name.utf8.count):\(name)\(value.utf8.count):\(value)"
        }
        return text
    }

    static func decode(_ text: String) throws(DataProtectionError) -> [String: String] {
        let bytes = Array(text.utf8)
        var index = 0
        func field() throws(DataProtectionError) -> String {
            var count = 0
            var digits = 0
            while index < bytes.count, bytes[index] != UInt8(ascii: ":") {
                let byte = bytes[index]
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte), digits < 9 else { throw corrupt }
                count = count * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
                index += 1
            }
            guard digits > 0, index < bytes.count, index + 1 + count <= bytes.count else { throw corrupt }
            index += 1
            defer { index += count }
            guard let string = String(validating: bytes[index..<index + count], as: UTF8.self) else { throw corrupt }
            return string
        }
        var attributes: [String: String] = [:]
        while index < bytes.count {
            let name = try field()
            let value = try field()
            guard attributes.updateValue(value, forKey: name) == nil else { throw corrupt }
        }
        return attributes
    }

    private static var corrupt: DataProtectionError {
        DataProtectionError(.integrityFailure, "An item's attributes are corrupt.")
    }

    /// Refuses (`invalidArgument`) what SQLite text cannot hold or the keychain does not allow:
    /// an empty attribute name, a NUL byte anywhere.
    static func validate(label: String?, attributes: [String: String]?) throws(DataProtectionError) {
        if let label, label.utf8.contains(0) {
            throw DataProtectionError(.invalidArgument, "An item's label cannot contain a NUL byte.")
        }
        for (name, value) in attributes ?? [:] {
            guard !name.isEmpty else { throw DataProtectionError(.invalidArgument, "An attribute name is empty.") }
            guard !name.utf8.contains(0), !value.utf8.contains(0) else {
                throw DataProtectionError(.invalidArgument, "The attribute \(name.utf8.contains(0) ? "name" : name) contains a NUL byte.")
            }
        }
    }
}
