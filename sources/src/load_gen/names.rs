//! Word lists the generators draw names from.

/// First names.
pub(crate) const FIRST_NAMES: &[&str] = &[
    "Ada",
    "Alan",
    "Barbara",
    "Carl",
    "Dana",
    "Edsger",
    "Frances",
    "Grace",
    "Hedy",
    "Ivan",
    "Jean",
    "Ken",
    "Leslie",
    "Margaret",
    "Niklaus",
    "Ole",
    "Peter",
    "Radia",
    "Sophie",
    "Tim",
    "Ursula",
    "Vint",
    "Whitfield",
    "Xavier",
    "Yukihiro",
    "Zhang",
];

/// Last names.
pub(crate) const LAST_NAMES: &[&str] = &[
    "Allen",
    "Backus",
    "Conway",
    "Dijkstra",
    "Engelbart",
    "Floyd",
    "Goldberg",
    "Hopper",
    "Iverson",
    "Jones",
    "Knuth",
    "Lamport",
    "Liskov",
    "McCarthy",
    "Naur",
    "Perlman",
    "Ritchie",
    "Stonebraker",
    "Thompson",
    "Wirth",
];

/// Organizations.
pub(crate) const COMPANIES: &[&str] = &[
    "Acme Corporation",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay Industries",
    "Stark Industries",
    "Wayne Enterprises",
    "Cyberdyne",
    "Soylent",
    "Tyrell",
    "Wonka",
    "Gringotts",
    "Monsters Inc",
    "Oceanic",
    "Pied Piper",
    "Prestige Worldwide",
    "Dunder Mifflin",
    "Sterling Cooper",
    "Blue Sun",
];

/// What is auctioned.
pub(crate) const ITEMS: &[&str] = &[
    "Best Pizza in Town",
    "Gift Basket",
    "City Bar Crawl",
    "Custom Art",
    "Signed Memorabilia",
];

/// A name from the lists, by number.
pub(crate) fn person_name(n: u64) -> String {
    let first = FIRST_NAMES[(n % FIRST_NAMES.len() as u64) as usize];
    let last = LAST_NAMES[((n / FIRST_NAMES.len() as u64) % LAST_NAMES.len() as u64) as usize];
    format!("{first} {last}")
}
