"""One module per resource; each defines ``router``, included by :func:`svmstream.app.main.create_app`."""
