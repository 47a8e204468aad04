"""Several learner processes, one owner per model (``docs/cluster.md``).

* :mod:`.rendezvous`: which live member owns a model (highest-random-weight hashing);
* :mod:`.membership`: members' heartbeats in Redis and the model catalogue;
* :mod:`.leases`: a model's lease with its fencing token (Lua in :mod:`svmstream.app.stream.fencing`);
* :mod:`.store`: the snapshot store that refuses a write without the lease;
* :mod:`.coordinator`: the thread that gains, renews and hands off models.
"""
