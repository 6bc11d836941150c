"""Training's lines: the library logs them and says nothing unasked; the front end shows each
line once, under its name, on the stderr of the moment."""

import logging

import pytest

from translate.train.messages import LOGGER_NAME, show_on_stderr


@pytest.fixture
def bare_logger():
    """The training logger as a process has it before any front end set it up, restored after."""
    logger = logging.getLogger(LOGGER_NAME)
    saved = logger.handlers[:], logger.level, logger.propagate
    logger.handlers.clear()
    logger.setLevel(logging.NOTSET)
    logger.propagate = True
    yield logger
    logger.handlers[:], logger.level, logger.propagate = saved


def test_the_library_says_nothing_until_a_front_end_shows_its_lines(bare_logger, capsys):
    module_log = logging.getLogger("translate.train.progress")
    module_log.info("step 1")
    assert capsys.readouterr().err == ""
    show_on_stderr("translate-train")
    show_on_stderr("translate-train")  # a second run in one process: still one line each
    module_log.info("step %d · loss %.1f", 2, 2.5)
    logging.getLogger("translate.decode").info("not training's")
    assert capsys.readouterr().err == "translate-train: step 2 · loss 2.5\n"
