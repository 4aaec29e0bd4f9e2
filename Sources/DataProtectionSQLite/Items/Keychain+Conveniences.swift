extension Keychain {
    /// `["service": service, "account": account]`.
    public static func attributes(service: String, account: String) -> [String: String] {
        [serviceAttribute: service, accountAttribute: account]
    }
}
