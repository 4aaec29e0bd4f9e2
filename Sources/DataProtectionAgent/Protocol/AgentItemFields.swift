import DataProtection
import DataProtectionSQLite
import Foundation

/// The fields of the item requests and replies (`Keys/agent-protocol.md` §4, codes 40-48; §6).
extension AgentFieldWriter {
    /// An item's accessibility: its index in ``ItemAccessibility/allCases``, one byte.
    mutating func accessibility(_ value: ItemAccessibility) {
        u8(UInt8(ItemAccessibility.allCases.firstIndex(of: value)!))
    }

    /// A set of accessibilities: one byte, bit `i` for the `i`th of ``ItemAccessibility/allCases``.
    mutating func accessibilities(_ value: Set<ItemAccessibility>) {
        var mask: UInt8 = 0
        for (index, accessibility) in ItemAccessibility.allCases.enumerated() where value.contains(accessibility) { mask |= 1 << index }
        u8(mask)
    }

    /// Attributes: a u32 count, then each name and value (strings), sorted by name.
    mutating func attributes(_ value: [String: String]) {
        u32(UInt32(value.count))
        for (name, text) in value.sorted(by: { $0.key < $1.key }) {
            string(name)
            string(text)
        }
    }

    /// A secret's bytes, from secure memory straight into the frame (wiped once sent).
    mutating func secret(_ value: ItemSecret) {
        value.withUnsafeBytes { data($0) }
    }

    /// An item without its secret: id, label, accessibility, created and modified
    /// (milliseconds since 1970, i64), attributes.
    mutating func item(_ value: KeychainItem) {
        string(value.id)
        string(value.label)
        accessibility(value.accessibility)
        i64(Int64((value.creationDate.timeIntervalSince1970 * 1000).rounded()))
        i64(Int64((value.modificationDate.timeIntervalSince1970 * 1000).rounded()))
        attributes(value.attributes)
    }

    /// Items: a u32 count, then each item.
    mutating func items(_ value: [KeychainItem]) {
        u32(UInt32(value.count))
        for item in value { self.item(item) }
    }
}

extension AgentFieldReader {
    mutating func accessibility() throws(AgentProtocolViolation) -> ItemAccessibility {
        try element(of: ItemAccessibility.allCases, "item accessibility")
    }

    mutating func accessibilities() throws(AgentProtocolViolation) -> Set<ItemAccessibility> {
        let mask = try u8()
        guard mask >> ItemAccessibility.allCases.count == 0 else { throw AgentProtocolViolation("accessibility set \(mask)") }
        return Set(ItemAccessibility.allCases.enumerated().filter { mask & (1 << $0.offset) != 0 }.map(\.element))
    }

    mutating func attributes() throws(AgentProtocolViolation) -> [String: String] {
        let count = try u32()
        guard count <= 4096 else { throw AgentProtocolViolation("\(count) attributes") }
        var result: [String: String] = [:]
        for _ in 0..<count {
            let name = try string()
            guard result.updateValue(try string(), forKey: name) == nil else { throw AgentProtocolViolation("a repeated attribute") }
        }
        return result
    }

    /// A secret, copied straight into secure memory (the frame it came in is wiped by its reader).
    mutating func secret() throws(AgentProtocolViolation) -> ItemSecret {
        ItemSecret(bytes: try data())
    }

    mutating func item() throws(AgentProtocolViolation) -> KeychainItem {
        let id = try string()
        let label = try string()
        let accessibility = try accessibility()
        let created = try i64()
        let modified = try i64()
        return KeychainItem(id: id, label: label, attributes: try attributes(), accessibility: accessibility,
                            creationDate: Date(timeIntervalSince1970: Double(created) / 1000),
                            modificationDate: Date(timeIntervalSince1970: Double(modified) / 1000))
    }

    mutating func items() throws(AgentProtocolViolation) -> [KeychainItem] {
        let count = try u32()
        guard count <= 10_000_000 else { throw AgentProtocolViolation("\(count) items") }
        var result: [KeychainItem] = []
        for _ in 0..<count { result.append(try item()) }
        return result
    }
}
