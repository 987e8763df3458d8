"""The SGLang-style radix tree: matching, edge splitting, locking, LRU eviction of leaves."""

from __future__ import annotations

import random
import unittest

from hypothesis import given
from hypothesis import strategies as st

from promptcache.sim.radix import FIFOPolicy, LFUPolicy, RadixCache, RadixKey, TreeNode


def _key(tokens: list[int], extra: str | None = None) -> RadixKey:
    return RadixKey(tokens, extra)


class TestTreeNode(unittest.TestCase):
    def test_nodes_order_by_access_time(self) -> None:
        a = TreeNode(1, [1], None, tick=5)
        b = TreeNode(2, [2], None, tick=3)
        self.assertLess(b, a)
        self.assertEqual(len(a), 1)


class TestRadixCache(unittest.TestCase):
    def test_match_insert_and_split(self) -> None:
        tree = RadixCache()
        self.assertEqual(tree.insert(_key([1, 2, 3, 4, 5])), 0)
        self.assertEqual(tree.num_nodes(), 1)
        # A diverging insert splits the edge at the divergence.
        self.assertEqual(tree.insert(_key([1, 2, 3, 9, 9])), 3)
        self.assertEqual(tree.num_nodes(), 3)
        self.assertEqual(tree.total_size(), 7)  # [1 2 3] + [4 5] + [9 9]
        for tokens, expected in [([1, 2, 3, 4, 5, 6], 5), ([1, 2, 3, 9], 4), ([1, 2], 2),
                                 ([7], 0), ([], 0)]:
            with self.subTest(tokens=tokens):
                self.assertEqual(tree.peek_prefix(_key(tokens)), expected)
        # match_prefix splits a partial edge so the returned node ends at the match.
        result = tree.match_prefix(_key([1, 2, 3, 4, 7]))
        self.assertEqual(result.num_tokens, 4)
        self.assertEqual(result.last_node.key, [4])
        self.assertEqual(tree.num_nodes(), 4)
        self.assertEqual(tree.total_size(), 7)

    def test_peek_changes_nothing(self) -> None:
        tree = RadixCache()
        tree.insert(_key([1, 2, 3, 4]))
        before = (tree.num_nodes(), tree.root_node.children[1].last_access_time)
        self.assertEqual(tree.peek_prefix(_key([1, 2, 9])), 2)
        self.assertEqual((tree.num_nodes(), tree.root_node.children[1].last_access_time), before)

    def test_extra_key_isolation(self) -> None:
        tree = RadixCache()
        tree.insert(_key([1, 2, 3], "lora-a"))
        self.assertEqual(tree.peek_prefix(_key([1, 2, 3], "lora-a")), 3)
        self.assertEqual(tree.peek_prefix(_key([1, 2, 3], "lora-b")), 0)
        self.assertEqual(tree.peek_prefix(_key([1, 2, 3])), 0)
        tree.insert(_key([1, 2, 3]))
        self.assertEqual(tree.total_size(), 6)  # nothing shared across adapters

    def test_evict_lru_leaf_first_and_parent_after_children(self) -> None:
        tree = RadixCache(trim_leaves=False)
        tree.insert(_key([1, 2, 3, 4]))        # tick 1
        tree.insert(_key([1, 2, 5, 6]))        # tick 2: splits to [1 2] -> [3 4], [5 6]
        tree.insert(_key([7, 8]))              # tick 3
        tree.match_prefix(_key([1, 2, 3, 4]))  # tick 4: [3 4] is now the most recent leaf
        self.assertEqual(tree.evict(1), 2)     # whole leaf [5 6] (LRU) goes
        self.assertEqual(tree.peek_prefix(_key([1, 2, 5, 6])), 2)
        self.assertEqual(tree.evict(2), 2)     # then [7 8]
        self.assertEqual(tree.peek_prefix(_key([7, 8])), 0)
        self.assertEqual(tree.evict(10), 4)    # then [3 4], then its parent [1 2]
        self.assertEqual(tree.total_size(), 0)
        self.assertEqual(tree.evicted_tokens, 8)

    def test_split_keeps_the_unmatched_tail_old(self) -> None:
        # NOTE #6: a request sharing only [1 2] must not refresh the old tail [3 4].
        tree = RadixCache(trim_leaves=False)
        tree.insert(_key([1, 2, 3, 4]))  # tick 1
        tree.insert(_key([9, 9]))        # tick 2
        tree.insert(_key([1, 2, 5, 6]))  # tick 3: touches [1 2] and adds [5 6]
        self.assertEqual(tree.evict(2), 2)
        self.assertEqual(tree.peek_prefix(_key([1, 2, 3, 4])), 2)  # [3 4] was the oldest leaf
        self.assertEqual(tree.peek_prefix(_key([9, 9])), 2)

    def test_trim_evicts_exactly_and_keeps_the_head(self) -> None:
        tree = RadixCache()
        tree.insert(_key(list(range(10))))
        self.assertEqual(tree.evict(3), 3)
        self.assertEqual(tree.total_size(), 7)
        self.assertEqual(tree.peek_prefix(_key(list(range(10)))), 7)

    def test_locked_path_is_never_evicted(self) -> None:
        tree = RadixCache()
        tree.insert(_key([1, 2, 3]))
        tree.insert(_key([4, 5, 6]))
        node = tree.match_prefix(_key([1, 2, 3])).last_node
        tree.inc_lock_ref(node)
        self.assertEqual((tree.protected_size(), tree.evictable_size()), (3, 3))
        self.assertEqual(tree.evict(100), 3)
        self.assertEqual(tree.peek_prefix(_key([1, 2, 3])), 3)
        tree.dec_lock_ref(node)
        self.assertEqual((tree.protected_size(), tree.evictable_size()), (0, 3))
        self.assertEqual(tree.evict(100), 3)
        with self.assertRaises(RuntimeError):
            tree.dec_lock_ref(node)

    def test_lock_survives_a_later_split(self) -> None:
        tree = RadixCache()
        tree.insert(_key([1, 2, 3, 4]))
        node = tree.match_prefix(_key([1, 2, 3, 4])).last_node
        tree.inc_lock_ref(node)
        tree.insert(_key([1, 2, 7]))  # splits the locked edge
        self.assertEqual(tree.protected_size(), 4)
        self.assertEqual(tree.evictable_size(), 1)
        tree.dec_lock_ref(node)
        self.assertEqual((tree.protected_size(), tree.evictable_size()), (0, 5))

    def test_lfu_and_fifo_policies(self) -> None:
        for policy, survivor in [(LFUPolicy(), [1, 1]), (FIFOPolicy(), [2, 2])]:
            with self.subTest(policy=policy.name):
                tree = RadixCache(policy, trim_leaves=False)
                tree.insert(_key([1, 1]))
                tree.insert(_key([2, 2]))
                tree.match_prefix(_key([1, 1]))  # [1 1] hit once more; [2 2] newer
                tree.evict(2)
                self.assertEqual(tree.peek_prefix(_key(survivor)), 2)


@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), min_size=1, max_size=25),
       st.lists(st.integers(0, 3), max_size=12))
def test_match_equals_longest_common_prefix(inserted: list[list[int]], query: list[int]) -> None:
    tree = RadixCache()
    for seq in inserted:
        tree.insert(_key(seq))

    def lcp(a: list[int], b: list[int]) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    expected = max(lcp(seq, query) for seq in inserted)
    assert tree.peek_prefix(_key(query)) == expected
    assert tree.match_prefix(_key(query)).num_tokens == expected
    assert tree.peek_prefix(_key(query)) == expected  # splitting did not change the contents
    distinct_prefixes = {tuple(seq[:i]) for seq in inserted for i in range(1, len(seq) + 1)}
    assert tree.total_size() == len(distinct_prefixes)


def test_random_operations_keep_sizes_consistent() -> None:
    rng = random.Random(7)
    tree = RadixCache()
    locked = []
    for _ in range(400):
        op = rng.random()
        seq = [rng.randrange(3) for _ in range(rng.randrange(1, 10))]
        if op < 0.5:
            tree.insert(_key(seq))
        elif op < 0.7:
            node = tree.match_prefix(_key(seq)).last_node
            tree.inc_lock_ref(node)
            locked.append(node)
        elif op < 0.85 and locked:
            tree.dec_lock_ref(locked.pop(rng.randrange(len(locked))))
        else:
            tree.evict(rng.randrange(1, 8))
        # sizes equal a walk of the tree; locked tokens are exactly the protected size
        total = protected = 0
        stack = list(tree.root_node.children.values())
        while stack:
            node = stack.pop()
            total += len(node.key)
            protected += len(node.key) if node.lock_ref > 0 else 0
            stack.extend(node.children.values())
            assert node.key, "no empty edges"
        assert tree.total_size() == total
        assert tree.protected_size() == protected
