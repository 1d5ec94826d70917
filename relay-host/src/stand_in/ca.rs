//! The session's own CA: an ECDSA P-256 key made for the session, held in this process's
//! memory only (never written), its certificate handed to the session; and a leaf per API host
//! it signs on first use (a DNS name, or an IP address, as its one subject alternative name).

use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;
use zeroize::Zeroizing;

use super::StandInError;
use crate::net::allow::Host;

/// One session's CA and the TLS configurations of the leaves it signed.
pub(super) struct SessionCa {
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
    pem: String,
    leaves: Mutex<Vec<(Host, Arc<ServerConfig>)>>,
}

impl SessionCa {
    /// A fresh CA: its own key, a certificate that may sign leaves only (path length 0).
    pub(super) fn new() -> Result<SessionCa, StandInError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params
            .distinguished_name
            .push(DnType::CommonName, "relay stand-in session CA");
        let cert = params.self_signed(&key)?;
        Ok(SessionCa {
            der: cert.der().clone(),
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
            leaves: Mutex::new(Vec::new()),
        })
    }

    /// The CA's certificate, PEM.
    pub(super) fn pem(&self) -> &str {
        &self.pem
    }

    /// The TLS server configuration for `host`: its leaf (made on first use) and the CA.
    pub(super) fn server_config(&self, host: &Host) -> Result<Arc<ServerConfig>, StandInError> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, c)) = leaves.iter().find(|(h, _)| h == host) {
            return Ok(Arc::clone(c));
        }
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![host.to_string()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, host.to_string());
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer)?;
        let pkcs8 = Zeroizing::new(key.serialize_der());
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pkcs8.to_vec()));
        let chain = vec![cert.der().clone(), self.der.clone()];
        let config = super::tls::server_config(chain, key_der).map_err(StandInError::Tls)?;
        leaves.push((host.clone(), Arc::clone(&config)));
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_is_made_once_per_host() {
        let ca = SessionCa::new().unwrap();
        let h = Host::Name("api.anthropic.com".into());
        let a = ca.server_config(&h).unwrap();
        let b = ca.server_config(&h).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let ip = Host::Ip("127.0.0.1".parse().unwrap());
        assert!(!Arc::ptr_eq(&a, &ca.server_config(&ip).unwrap()));
        assert_eq!(a.alpn_protocols, [b"http/1.1".to_vec()]);
    }
}
