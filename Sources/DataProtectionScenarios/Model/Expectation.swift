import DataProtection
import Foundation

/// What a step must produce: the part after `->`.
public enum StepExpectation: Sendable, Hashable, CustomStringConvertible {
    /// Nothing after the statement, or `-> ok`: the step must succeed.
    case success
    /// `-> error <code>`: the step must fail with this code.
    case error(DataProtectionError.Code)
    /// `-> <data>`, for reads: exactly these bytes.
    case data(Data)
    /// `-> <integer>`, for `offset`, `size` (and `seek-end`).
    case integer(UInt64)
    /// `-> <name>...`, for `ls`: exactly these names, in any order (none: an empty directory).
    case names([String])
    /// `-> key=value...`, for `stat`: each given key must match.
    case attributes(AttributeExpectation)

    /// `-> ok`.
    public static let ok = StepExpectation.success

    /// `-> "text"`: the UTF-8 bytes of `text`.
    public static func text(_ text: String) -> StepExpectation { .data(Data(text.utf8)) }

    /// `-> class=… size=… type=…`: the given attributes.
    public static func attributes(
        class protectionClass: ProtectionClass? = nil, size: UInt64? = nil, type: ProtectedItemAttributes.ItemType? = nil
    ) -> StepExpectation {
        .attributes(AttributeExpectation(protectionClass: protectionClass, size: size, type: type))
    }

    /// The expectation as written after `->`.
    public var description: String {
        switch self {
        case .success: "ok"
        case .error(let code): "error \(code.rawValue)"
        case .data(let data): DataValue.format(data)
        case .integer(let value): "\(value)"
        case .names(let names): names.isEmpty ? "empty" : names.map(NameList.word).joined(separator: " ")
        case .attributes(let attributes): attributes.description
        }
    }
}

/// The keys a `stat` expectation may give.
public struct AttributeExpectation: Sendable, Hashable, CustomStringConvertible {
    /// `class=<class>`.
    public var protectionClass: ProtectionClass?
    /// `size=<bytes>`.
    public var size: UInt64?
    /// `type=file|directory`.
    public var type: ProtectedItemAttributes.ItemType?

    /// The attributes to check; `nil` fields are not checked.
    public init(protectionClass: ProtectionClass? = nil, size: UInt64? = nil, type: ProtectedItemAttributes.ItemType? = nil) {
        self.protectionClass = protectionClass
        self.size = size
        self.type = type
    }

    public var description: String {
        var parts: [String] = []
        if let protectionClass { parts.append("class=\(protectionClass)") }
        if let size { parts.append("size=\(size)") }
        if let type { parts.append("type=\(type.rawValue)") }
        return parts.joined(separator: " ")
    }
}

/// How `ls` names are written.
enum NameList {
    /// Words that mean something after `->` and so are written as strings when they are names.
    static let keywords: Set<String> = ["ok", "error", "empty"]

    static func word(_ name: String) -> String {
        keywords.contains(name) ? DataValue.quote(Data(name.utf8)) : Action.word(name)
    }
}
