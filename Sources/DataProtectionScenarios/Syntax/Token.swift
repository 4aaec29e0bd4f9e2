import Foundation

/// A word of a statement line: a bare word, a string, or a bare prefix glued to a
/// string (`passcode="12 34"`), with the column it starts at.
struct Token: Sendable, Hashable {
    /// The bare characters (for a plain string: empty).
    var bare: String
    /// The bytes of the string part, if the token has one (escapes resolved).
    var quoted: Data?
    /// 1-based column of the first character.
    var column: Int
    /// The token as written, for error messages.
    var source: String

    /// A bare word (no string part).
    var word: String? { quoted == nil ? bare : nil }

    /// `->`.
    var isArrow: Bool { quoted == nil && bare == "->" }

    /// How the token is named in "found …".
    var found: String { "`\(source)`" }
}

/// One statement line after lexing.
struct Line: Sendable {
    /// 1-based line number.
    var number: Int
    var tokens: [Token]
    /// The statement as written, without its comment and surrounding blanks.
    var source: String
    /// The column just past the last character of the statement (where "end of line" is).
    var endColumn: Int
}
