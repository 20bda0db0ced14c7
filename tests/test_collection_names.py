"""bulkwire's collection names against the official client's own (``inflect``'s plural)."""
import pytest

from bulkwire.conventions import collection_name

# class names entities commonly have: single words of every ending the plural rules
# distinguish, the irregular ones, compound (CamelCase, snake_case) and upper-case names
CLASS_NAMES = """
User Company Address Box Person Child Category Day Leaf Bus Match Hero Photo Quiz Key Analysis
Status Index Mouse Knife Datum Series Sheep Man Woman OrderLine BlogPost MyClass Category2 dict
VectorDoc Iris Data Thief Settings Order Product Employee Customer Invoice Payment Account Item
Cart Review Comment Post Tag Message Notification Event Task Project Team Role Permission Group
Session Token Device Location City Country Region Currency Price Discount Coupon Shipment
Warehouse Supplier Vendor Contact Lead Opportunity Ticket Issue Bug Feature Release Version
Document File Image Video Song Album Artist Movie Book Author Library Student Teacher Course
Class Grade School Hospital Doctor Patient Appointment Embedding Vector Chunk Batch Entry Log
Metric Alert Policy Rule Sensor Reading Measurement Wolf Life Half Shelf Wife Elf Potato Tomato
Echo Criterion Phenomenon Foot Tooth Goose Ox Fish Deer Species News Info Information Equipment
Metadata Process Crisis Thesis Basis Axis Matrix Vertex Appendix Helix Cactus Fungus Radius
Bacterium Stimulus Alumnus Alumna Genus Nexus Medium Stadium Memorandum Todo Memo Logo Repo Demo
Promo Combo Zero Euro Taco Studio Radio Audio Portfolio Scenario Cargo Mango Tornado Volcano
Money Monkey Journey Toy Survey Query Story Entity Activity Reply Quantity Property History
Inventory Delivery Roof Chief Proof Belief Staff Safe Chef Glass Gas Kiss Bias Alias Canvas Atlas
Lens Virus Bonus Campus Fox Tax Suffix Prefix Complex Annex Dish Church Boss Waltz Fez Buzz
Topaz Stomach Monarch Epoch Feedback Software Content Music Furniture Advice Evidence Research
Chat Faq Statistics Analytics Options Details Stats Items Results Records Credentials
Permissions Preferences Clothes Vita Vertebra Persona Schema Formula Agenda Media Area Idea
HTTPRequest APIKey XMLDocument URL ID UUID API JSON SQL IPAddress DNAData UserSettings UserData
UserInfo UserMetadata UserStatus UserAnalysis UserIndex UserKnife UserPhoto UserHero UserPotato
UserQuiz UserBox UserWoman UserDatum UserCriterion UserCompany UserCity ProductCategory
OrderItem ShoppingCart LineItem PurchaseOrder AuditLog UserRole AccessToken WebHook Subscription
Tenant Organization Workspace Folder Attachment Note Schedule Calendar Meeting Building Vehicle
Route Flight Hotel Booking Reservation Recipe Ingredient Person2 User1 Doc42 user_profile
user_data order_line lowercase
""".split()


def test_the_list_is_broad_and_has_no_repeats():
    assert len(CLASS_NAMES) >= 100 and len(set(CLASS_NAMES)) == len(CLASS_NAMES)


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_collection_name_is_the_official_clients(name):
    from ravendb.documents.conventions import DocumentConventions

    cls = type(name, (), {})
    assert collection_name(cls) == DocumentConventions().find_collection_name(cls)
