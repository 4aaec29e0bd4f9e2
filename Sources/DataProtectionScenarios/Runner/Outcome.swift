import DataProtection
import Foundation

/// What a step produced.
enum Outcome {
    /// Succeeded with nothing to show.
    case done
    case data(Data)
    case integer(UInt64)
    case names([String])
    case attributes(ProtectedItemAttributes)
    case failed(DataProtectionError)

    /// How the outcome is shown after "got".
    var description: String {
        switch self {
        case .done: "ok"
        case .data(let data): DataValue.format(data)
        case .integer(let value): "\(value)"
        case .names(let names): StepExpectation.names(names.sorted()).description
        case .attributes(let attributes):
            AttributeExpectation(protectionClass: attributes.protectionClass, size: attributes.size, type: attributes.type).description
        case .failed(let error): "error \(error.code.rawValue) (\(error.message))"
        }
    }
}

/// A step that did not produce what it expected.
struct Mismatch: Error {
    var expected: String
    var actual: String
}

extension StepExpectation {
    /// `nil` if `outcome` is what this expectation asks for.
    func mismatch(with outcome: Outcome) -> Mismatch? {
        let miss = Mismatch(expected: description, actual: outcome.description)
        switch (self, outcome) {
        case (.error(let code), .failed(let error)):
            return code == error.code ? nil : miss
        case (_, .failed), (.error, _):
            return miss
        case (.success, _):
            return nil
        case (.data(let expected), .data(let actual)):
            guard expected != actual else { return nil }
            var mismatch = miss
            if mismatch.expected == mismatch.actual || expected.count > 96 || actual.count > 96 {
                let common = zip(expected, actual).prefix { $0 == $1 }.count
                mismatch.actual += " (\(actual.count) bytes, expected \(expected.count); first difference at byte \(common))"
            }
            return mismatch
        case (.integer(let expected), .integer(let actual)):
            return expected == actual ? nil : miss
        case (.names(let expected), .names(let actual)):
            return expected.sorted() == actual.sorted() ? nil : miss
        case (.attributes(let expected), .attributes(let actual)):
            let matches = (expected.protectionClass.map { $0 == actual.protectionClass } ?? true)
                && (expected.size.map { $0 == actual.size } ?? true)
                && (expected.type.map { $0 == actual.type } ?? true)
            return matches ? nil : miss
        default:
            return miss
        }
    }
}
