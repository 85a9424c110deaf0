"""Independent references the verifier compares kernels with, written from the standards.

They never import the generator's arithmetic (generator/gf128.py, kernels/): a bug there
must not be reproduced here. AES itself comes from `cryptography` (aes.py), and each
reference is tested on its own against the published vectors and, where it has the mode,
against `cryptography`.

- aes.py: AES-ECB from `cryptography`, the one primitive the others borrow.
- standard.py: the standard block-cipher modes (ECB, CBC, CFB, OFB) from `cryptography`, for the
  functions whose record names one, and the CAVP files that check them.
- gcm.py: GF(2^128) in GCM's bit order, GHASH and AES-GCM (NIST SP 800-38D), any IV length.
- gcmsiv.py: POLYVAL (two ways) and AES-GCM-SIV (RFC 8452).
- otr.py: AES-OTR v3/v3.1 (both associated-data variants) and the designer's vectors.
- wideblock.py: Rijndael with 256-bit blocks and the Simpira v2 permutation (b = 2); its
  S-box and MixColumns come from aesgen.aesref (the AES model the simulator runs), the
  published vectors keep both honest.

The references for XTS, OCB and the MPC kernels live with their checks (xts.py, ocb.py,
mpc.py); the FIPS-197 key expansion with the key-schedule check (kat.py).
"""
