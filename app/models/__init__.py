"""Named models: the registry and its learners, published views, configuration, estimator
factory, snapshots and learning meters."""
