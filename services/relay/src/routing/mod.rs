//! Routing: deciding where a frame goes and getting it there. `route` resolves and checks a
//! frame and builds its writes, `dispatch` delivers committed writes (in the `wire` forms) (locally through the `hub`,
//! or across pods), `directory` caches stored peers for name resolution, `inbound` applies what
//! other pods send (forwards, presence, revocations), and the `sweeper` expires what could not be
//! delivered.

pub mod conversation_ends;
pub mod directory;
pub mod dispatch;
pub mod hub;
pub mod inbound;
pub mod roster;
pub mod route;
pub mod sweeper;
pub mod wire;
