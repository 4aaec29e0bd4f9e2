import CSocket

/// The process's limit on open descriptors, for a server of many connections.
public enum DescriptorLimit {
    /// Raises the soft limit on open descriptors (`RLIMIT_NOFILE`) to the hard one and
    /// returns the limit now in force. (Soft limits start low, often 1,024, for the sake of
    /// programs that use `select(2)`; a server that uses none can go as far as the hard limit.)
    @discardableResult
    public static func raiseToHardLimit() throws(SocketError) -> Int {
        let limit = dp_raise_descriptor_limit()
        guard limit >= 0 else { throw SocketError("setrlimit(RLIMIT_NOFILE)", errno: Int32(-limit)) }
        return Int(limit)
    }
}
