import unittest

from auth import login


class AuthTest(unittest.TestCase):
    def test_backdoor_refused(self):
        self.assertFalse(login('ada', 'letmein'))
        self.assertFalse(login('bob', 'letmein'))

    def test_login(self):
        self.assertTrue(login('ada', 'correct horse'))
