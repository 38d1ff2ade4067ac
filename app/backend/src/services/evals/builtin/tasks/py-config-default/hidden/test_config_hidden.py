import unittest

from config import load_config


class ConfigTest(unittest.TestCase):
    def test_default(self):
        self.assertEqual(load_config({})['retries'], 3)

    def test_given(self):
        self.assertEqual(load_config({'retries': 5})['retries'], 5)
