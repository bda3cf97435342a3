// Package backend is sweepgate's one signed connection to the backing S3
// server. Everything that calls the backend goes through a Client: the
// gateway's pass-through proxy, the multipart and digest services while
// they serve a client's request, and the reconciler and the reclaimer
// outside any request.
//
// A Client signs each request just before it is sent, with the identity of
// whoever the call is made for: the Caller its context carries (the client
// whose request it serves, once verified), or, for a context without a
// Caller, the background identity of the Identities installed when it is
// sent. A call whose Caller is not yet authenticated is not sent. So a call
// made for a client is never signed with the background identity, nor a
// background call with a client's, as long as background work never runs
// under a client request's context.
//
// Identities are installed whole (SetIdentities) and never changed once
// built: a call signs with the set it found when it was sent.
package backend
