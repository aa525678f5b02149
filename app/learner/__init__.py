"""The learner's page: one state (:mod:`.state`), thin views over it, assembled in :mod:`.page`."""
