#ifndef DATAPROTECTION_CTSS_SHIM_H
#define DATAPROTECTION_CTSS_SHIM_H
/* tpm2-tss (Debian: libtss2-dev): ESAPI, the TCTI loader, response-code decoding and
   marshalling. Only TPMBridge imports this module. The templates are built here, in C,
   because Swift sees the TPM's nested unions as unwieldy tuples; they are normative
   (Keys/key-hierarchy.md §4.4). */
#include <stdint.h>
#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_sys.h>

extern void explicit_bzero(void *pointer, size_t count);

/* Overwrites `count` bytes at `pointer` with zeros; never optimised away. */
static inline void dp_tpm_wipe(void *pointer, size_t count) {
    if (pointer != NULL && count > 0) explicit_bzero(pointer, count);
}

/* The trivial policy: 32 zero bytes, the policyDigest of a fresh SHA-256 policy session
   (no policy command run). An object with it and userWithAuth clear is used through a policy
   session only; a policy without TPM2_PolicyAuthValue / TPM2_PolicyPassword uses no auth
   value, so the TPM does not check lockout for it (TPM 2.0 Part 1 §19.7; libtpms
   CheckAuthSession: `authUsed` clear), although the object is not noDA. */
static inline void dp_tpm_trivial_policy(TPM2B_DIGEST *out) {
    memset(out, 0, sizeof *out);
    out->size = 32;
}

/* The storage root key: the TCG "SRK" template, ECC NIST P-256 with AES-128-CFB, under
   the owner hierarchy, empty auth. Deterministic: the same TPM and owner seed always give
   the same key, so it is recreated on demand and never persisted. Dictionary-attack
   protected (no noDA), userWithAuth clear and the trivial policy: its children are loaded
   and created through a policy session, which the TPM serves in lockout too. */
static inline void dp_tpm_srk_template(TPM2B_PUBLIC *out) {
    memset(out, 0, sizeof *out);
    out->publicArea.type = TPM2_ALG_ECC;
    out->publicArea.nameAlg = TPM2_ALG_SHA256;
    out->publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    dp_tpm_trivial_policy(&out->publicArea.authPolicy);
    out->publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    out->publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    out->publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    out->publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    out->publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    out->publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    out->publicArea.unique.ecc.x.size = 32;
    out->publicArea.unique.ecc.y.size = 32;
}

/* A keyed-hash HMAC-SHA-256 signing key made inside the TPM (sensitiveDataOrigin), bound to
   it and its parent (fixedTPM, fixedParent), dictionary-attack protected (never noDA).
   `withAuthValue` set: used with its auth value (userWithAuth; the passcode object, whose
   wrong auth values count). Clear: userWithAuth clear and the trivial policy (the device
   key, used through a policy session, which works in lockout). */
static inline void dp_tpm_hmac_template(TPM2B_PUBLIC *out, int withAuthValue) {
    memset(out, 0, sizeof *out);
    out->publicArea.type = TPM2_ALG_KEYEDHASH;
    out->publicArea.nameAlg = TPM2_ALG_SHA256;
    out->publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_SIGN_ENCRYPT
        | (withAuthValue ? TPMA_OBJECT_USERWITHAUTH : 0);
    if (!withAuthValue) dp_tpm_trivial_policy(&out->publicArea.authPolicy);
    out->publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_HMAC;
    out->publicArea.parameters.keyedHashDetail.scheme.details.hmac.hashAlg = TPM2_ALG_SHA256;
}

/* An NV index of the owner hierarchy, read and written with the owner's authorisation
   (OWNERREAD, OWNERWRITE; not AUTHREAD/AUTHWRITE), dictionary-attack protected (no NO_DA):
   the owner hierarchy is a permanent handle, which the TPM exempts from lockout (TPM 2.0
   Part 1 §19.8.5; libtpms IsDAExempted), so the index works in lockout. An ordinary index
   of `size` bytes, or (`counter`) a monotonic 8-byte counter. */
static inline void dp_tpm_nv_template(TPM2B_NV_PUBLIC *out, uint32_t index, uint16_t size, int counter) {
    memset(out, 0, sizeof *out);
    out->nvPublic.nvIndex = index;
    out->nvPublic.nameAlg = TPM2_ALG_SHA256;
    out->nvPublic.attributes = TPMA_NV_OWNERWRITE | TPMA_NV_OWNERREAD
        | ((counter ? TPM2_NT_COUNTER : TPM2_NT_ORDINARY) << TPMA_NV_TPM2_NT_SHIFT);
    out->nvPublic.dataSize = counter ? 8 : size;
}

/* Flushes the session or object `handle` left in the TPM by another process (one that ESAPI
   does not track), through the SAPI context under `esys`: TPM2_FlushContext. */
static inline TSS2_RC dp_tpm_flush_handle(ESYS_CONTEXT *esys, TPM2_HANDLE handle) {
    TSS2_SYS_CONTEXT *sys = NULL;
    TSS2_RC rc = Esys_GetSysContext(esys, &sys);
    if (rc != TSS2_RC_SUCCESS || sys == NULL) return rc;
    return Tss2_Sys_FlushContext(sys, handle);
}

/* Whether the object's public area (`TPM2B_PUBLIC`) has noDA. */
static inline int dp_tpm_public_has_noda(const TPM2B_PUBLIC *public) {
    return (public->publicArea.objectAttributes & TPMA_OBJECT_NODA) != 0;
}

/* The value of one TPM property (TPM2_CAP_TPM_PROPERTIES), 0 if the TPM did not return it. */
static inline uint32_t dp_tpm_property_value(const TPMS_CAPABILITY_DATA *data, uint32_t property) {
    if (data == NULL || data->capability != TPM2_CAP_TPM_PROPERTIES) return 0;
    for (uint32_t i = 0; i < data->data.tpmProperties.count && i < TPM2_MAX_TPM_PROPERTIES; i++) {
        if (data->data.tpmProperties.tpmProperty[i].property == property)
            return data->data.tpmProperties.tpmProperty[i].value;
    }
    return 0;
}

/* The `index`-th handle of a TPM2_CAP_HANDLES answer (0 beyond its count). */
static inline uint32_t dp_tpm_handle_at(const TPMS_CAPABILITY_DATA *data, uint32_t index) {
    if (data == NULL || data->capability != TPM2_CAP_HANDLES || index >= data->data.handles.count) return 0;
    return data->data.handles.handle[index];
}

static inline uint32_t dp_tpm_handle_count(const TPMS_CAPABILITY_DATA *data) {
    if (data == NULL || data->capability != TPM2_CAP_HANDLES) return 0;
    return data->data.handles.count;
}
#endif
