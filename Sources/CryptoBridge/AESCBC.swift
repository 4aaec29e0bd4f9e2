import COpenSSL
import SodiumBridge

/// AES-128-CBC with PKCS#7 padding (libcrypto's EVP), as the Secret Service's
/// `dh-ietf1024-sha256-aes128-cbc-pkcs7` algorithm carries secrets. Plaintexts and keys stay in
/// secure memory; ciphertexts and initialisation vectors are public.
package enum AES128CBC {
    /// The key length and the block (and IV) length, in bytes.
    package static let keyCount = 16
    package static let blockCount = 16

    /// `plaintext` encrypted under `key` with `iv`, PKCS#7-padded.
    package static func encrypt(_ plaintext: SecureBytes, key: SecureBytes, iv: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == keyCount, iv.count == blockCount else { throw CryptoError("AES-128-CBC takes a 16-byte key and a 16-byte IV.") }
        let output = SecureBytes(count: plaintext.count + blockCount)
        let count = try plaintext.withUnsafeBytes { input throws(CryptoError) -> Int in
            try output.withUnsafeMutableBytes { buffer throws(CryptoError) -> Int in
                try run(encrypting: true, key: key, iv: iv, input: input, output: buffer)
            }
        }
        return output.withUnsafeBytes { Array($0.prefix(count)) }
    }

    /// `ciphertext` decrypted under `key` with `iv`, its padding checked and removed, in secure memory.
    ///
    /// - Throws: when the length is not whole blocks or the padding is wrong (a wrong key, a tampered text).
    package static func decrypt(_ ciphertext: [UInt8], key: SecureBytes, iv: [UInt8]) throws(CryptoError) -> SecureBytes {
        guard key.count == keyCount, iv.count == blockCount else { throw CryptoError("AES-128-CBC takes a 16-byte key and a 16-byte IV.") }
        guard !ciphertext.isEmpty, ciphertext.count % blockCount == 0 else {
            throw CryptoError("An AES-128-CBC ciphertext is whole blocks of 16 bytes; this one has \(ciphertext.count).")
        }
        let input = SecureBytes(count: ciphertext.count) { $0.copyBytes(from: ciphertext) }
        let buffer = SecureBytes(count: ciphertext.count + blockCount)
        defer { buffer.wipe() }
        let count = try input.withUnsafeBytes { input throws(CryptoError) -> Int in
            try buffer.withUnsafeMutableBytes { output throws(CryptoError) -> Int in
                try run(encrypting: false, key: key, iv: iv, input: input, output: output)
            }
        }
        return SecureBytes(copying: buffer, offset: 0, count: count)
    }

    /// One EVP pass over `input` into `output` (room for one block more); the bytes written.
    private static func run(encrypting: Bool, key: SecureBytes, iv: [UInt8], input: UnsafeRawBufferPointer,
                            output: UnsafeMutableRawBufferPointer) throws(CryptoError) -> Int {
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError("libcrypto cannot make a cipher context.") }
        defer { EVP_CIPHER_CTX_free(context) }
        let started = key.withUnsafeBytes { keyBytes in
            EVP_CipherInit_ex(context, EVP_aes_128_cbc(), nil, keyBytes.bindMemory(to: UInt8.self).baseAddress, iv, encrypting ? 1 : 0)
        }
        guard started == 1 else { throw CryptoError("libcrypto cannot start AES-128-CBC.") }
        let out = output.bindMemory(to: UInt8.self).baseAddress
        var first: Int32 = 0
        guard EVP_CipherUpdate(context, out, &first, input.bindMemory(to: UInt8.self).baseAddress, Int32(input.count)) == 1 else {
            throw CryptoError("AES-128-CBC failed.")
        }
        var last: Int32 = 0
        guard EVP_CipherFinal_ex(context, out.map { $0 + Int(first) }, &last) == 1 else {
            throw CryptoError(encrypting ? "AES-128-CBC failed." : "The secret does not decrypt: its padding is wrong (a wrong key, or a tampered text).")
        }
        return Int(first + last)
    }
}
