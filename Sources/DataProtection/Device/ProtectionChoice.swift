/// The class a new file or directory takes: one named, or the one its place gives it
/// (``inherited``: the replaced file's, else the directory's, else the default).
///
/// A type of its own so that `.none` can only mean the class ``ProtectionClass/none``:
/// with an optional `ProtectionClass?` parameter, `.none` meant "no class given" and the
/// new file quietly took `completeUntilFirstUserAuthentication`.
///
/// ```swift
/// try store.write(data, to: "cache/thumb.png", protection: .none)      // class none
/// try store.write(data, to: "Documents/notes.txt", protection: .complete)
/// try store.write(data, to: "Documents/more.txt")                     // inherited
/// try store.write(data, to: path, protection: ProtectionChoice(chosenClass))  // from a ProtectionClass?
/// ```
public struct ProtectionChoice: Sendable, Hashable, ExpressibleByNilLiteral, CustomStringConvertible {
    /// The class named; `nil` for ``inherited``.
    public let protectionClass: ProtectionClass?

    /// `protectionClass`, or ``inherited`` for `nil`.
    public init(_ protectionClass: ProtectionClass?) {
        self.protectionClass = protectionClass
    }

    /// `nil` is ``inherited``.
    public init(nilLiteral: ()) {
        protectionClass = nil
    }

    /// The class the new item's place gives it: the replaced file's, else its directory's
    /// (the nearest one that has a class), else ``ProtectionClass/default``.
    public static let inherited = ProtectionChoice(nil)
    /// ``ProtectionClass/complete``.
    public static let complete = ProtectionChoice(.complete)
    /// ``ProtectionClass/completeUnlessOpen``.
    public static let completeUnlessOpen = ProtectionChoice(.completeUnlessOpen)
    /// ``ProtectionClass/completeUntilFirstUserAuthentication``.
    public static let completeUntilFirstUserAuthentication = ProtectionChoice(.completeUntilFirstUserAuthentication)
    /// ``ProtectionClass/completeWhenUserInactive``.
    public static let completeWhenUserInactive = ProtectionChoice(.completeWhenUserInactive)
    /// ``ProtectionClass/none``: the class, never "not given".
    public static let none = ProtectionChoice(ProtectionClass.none)

    /// The class's name, or `inherited`.
    public var description: String { protectionClass?.rawValue ?? "inherited" }
}
