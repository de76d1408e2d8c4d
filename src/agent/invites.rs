//! A room's invites: the DuetAgent makes its room tokens (`access::token`) and
//! owns the generation they carry (`access::generation`). The first invite starts
//! the room's generation; revoking starts another, which the Sandbox object
//! learns first, closing the live sockets of the old one's tokens, so a
//! revoked token works nowhere once the answer is out.

use worker::Response;

use super::DuetAgent;
use crate::access::request;
use crate::access::roles::Mode;
use crate::access::signing;
use crate::access::token::{self, Claims};
use crate::api::invite::{self, InviteResponse, RevokeResponse};
use crate::api::route::origin_of;
use crate::api::{validate, ApiError};
use crate::room::calls::SandboxObject;
use crate::runtime::{clock, random, respond};

impl DuetAgent {
    /// `POST .../invites`: a room token of the role asked for. One made
    /// with a room token (an owner's) lasts no longer than that one.
    pub(super) async fn invite(
        &self,
        room: &str,
        url: &str,
        caller: Option<&Claims>,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        self.tokens_in_use()?;
        let request = validate::invite_request(body)?;
        self.touch(room).await?;
        let generation = match self.generation.current()? {
            Some(generation) => generation,
            None => self.new_generation(room).await?,
        };
        let asked = clock::now_ms().saturating_add(request.ttl_seconds * 1000);
        let claims = Claims {
            room: room.to_owned(),
            role: request.role,
            expires_at: caller.map_or(asked, |caller| asked.min(caller.expires_at)),
            generation,
            name: request.name,
        };
        Ok(respond::json(200, &self.mint(claims, url).await?)?)
    }

    /// `DELETE .../invites`: every room token of the room ends. A caller
    /// with a room token gets another like it, of the new generation.
    pub(super) async fn revoke(
        &self,
        room: &str,
        url: &str,
        caller: Option<&Claims>,
    ) -> Result<Response, ApiError> {
        self.tokens_in_use()?;
        let invite = match self.generation.current()? {
            // No token of the room was ever made, or all are gone with it.
            None => None,
            Some(_) => {
                let generation = self.new_generation(room).await?;
                match caller {
                    None => None,
                    Some(caller) => {
                        let renewed = Claims {
                            generation,
                            ..caller.clone()
                        };
                        Some(self.mint(renewed, url).await?)
                    }
                }
            }
        };
        let answer = RevokeResponse {
            revoked: true,
            invite,
        };
        Ok(respond::json(200, &answer)?)
    }

    /// Invites mean nothing where everyone is an owner.
    fn tokens_in_use(&self) -> Result<(), ApiError> {
        match request::mode(&self.env)? {
            Mode::Token => Ok(()),
            Mode::Open => Err(ApiError::OpenAccess),
        }
    }

    /// Starts a new generation of the room's tokens: the Sandbox object
    /// keeps it (and ends the sockets of the old one) before this object
    /// does, so that no token is taken there that is refused here.
    async fn new_generation(&self, room: &str) -> Result<String, ApiError> {
        let generation = random::id('g');
        SandboxObject::of(&self.env, room)?
            .set_generation(Some(&generation))
            .await
            .map_err(|e| ApiError::Internal(format!("the room's sandbox was not told: {e}")))?;
        self.generation.set(Some(&generation))?;
        Ok(generation)
    }

    /// The signed token of `claims`, and the link that opens the room's page
    /// with it, on the origin `url` was asked at.
    async fn mint(&self, claims: Claims, url: &str) -> Result<InviteResponse, ApiError> {
        let payload = claims.payload();
        let mac = signing::mac(&self.env, token::signed(&payload).as_bytes()).await?;
        let token = token::assemble(&payload, &mac);
        Ok(InviteResponse {
            link: invite::link(origin_of(url), &claims.room, &token),
            token,
            role: claims.role,
            expires_at: claims.expires_at,
        })
    }
}
